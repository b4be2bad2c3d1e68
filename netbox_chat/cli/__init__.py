"""The program: commands, the REPL, doctor, export, completion, entry; nothing imports it."""

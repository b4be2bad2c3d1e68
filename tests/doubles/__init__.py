"""What the tests stand on: scripted model servers, the NetBox double, the session stores, data."""

"""Ollama's own API: the session's ChatOllama, with the liveness rule and the
read-ahead in its transport (the OpenAI-compatible servers' is openai.py)."""

from __future__ import annotations

import os

from langchain_ollama import ChatOllama

from netbox_chat import tls
from netbox_chat.config import Settings
from netbox_chat.models.coalesce import CoalescingTransport
from netbox_chat.models.coldstart import recorder
from netbox_chat.models.liveness import PatientTransport, ollama_probe


def build_model(
    settings: Settings, *, reasoning: bool | str | None = None, num_ctx: int | None = None
) -> ChatOllama:
    """The session's chat model. `reasoning` is sent as Ollama's `think` (see
    thinking.plan_thinking); `num_ctx` is the session's window, which must stay
    the same for every request of the session (a change makes Ollama reload
    the model, #9977)."""
    return ChatOllama(
        model=settings.model,
        base_url=settings.ollama_url,
        num_ctx=num_ctx or settings.num_ctx,
        temperature=0,
        num_predict=settings.num_predict,
        reasoning=reasoning,
        # ChatOllama has no timeout by default: a stalled server would hang a
        # turn forever. The timeout covers connect and each read of the stream,
        # but a silent server that still answers /api/ps is waited for
        # (liveness.py): loading a model or reading a long prompt takes minutes.
        client_kwargs={"timeout": settings.request_timeout, "verify": tls.context()},
        # A reply read slower than it streams is read in fewer pieces (coalesce.py).
        async_client_kwargs={
            "transport": CoalescingTransport(
                PatientTransport(
                    ollama_probe(settings.ollama_url, settings.request_timeout),
                    settings.request_timeout,
                    loaded=recorder(os.environ),  # the user's cold start, for doctor
                )
            )
        },
    )

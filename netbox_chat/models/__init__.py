"""Owns the model servers."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from netbox_chat.config import Settings, source_of, without_userinfo
from netbox_chat.errors import UserFacingError, pick_model
from netbox_chat.models.window import session_window

if TYPE_CHECKING:
    from netbox_chat.models.dialects import ServerFacts
    from netbox_chat.models.model_info import ModelInfo


@dataclass(frozen=True)
class Served:
    """What a session knows of its model before the first turn: what the
    server said of it (None: it could not be asked) and the window every
    request of the session is sized to."""

    info: ModelInfo | None
    window: int
    facts: ServerFacts | None = None  # an OpenAI-compatible server's own
    problem: str | None = None  # why the server could not be asked, said at the prompt


class Provider(Protocol):
    """One kind of model server (simonw/llm's one plugin interface, in small):
    ask it about the model, then build the chat model a session talks to."""

    def served(self, settings: Settings, *, timeout: float) -> Served: ...

    def models(self, settings: Settings, *, timeout: float) -> tuple[str, ...]:
        """The models the server has, sorted (`/model` lists them, Tab completes
        them); UserFacingError when it cannot be asked."""
        ...

    def chat_model(
        self, settings: Settings, served: Served, *, reasoning: bool | str | None
    ) -> Any: ...


class OllamaProvider:
    """Ollama's own API through ChatOllama (models.ollama.build_model), as before."""

    def served(self, settings: Settings, *, timeout: float) -> Served:
        from netbox_chat.models.model_info import ModelInfoError, fetch_model_info

        try:
            info = fetch_model_info(settings.ollama_url, settings.model, timeout=timeout)
        except ModelInfoError as exc:
            # The session keeps the configured window, and the REPL says what
            # is wrong with Ollama or the model before the first question.
            problem = str(exc)
            if exc.status is None:  # not reached: the fix is the server or its URL
                where = source_of(settings, "ollama_url")
                problem += f": is `ollama serve` running and {where} right?"
            return Served(None, session_window(settings.num_ctx, None), problem=problem)
        return Served(info, session_window(settings.num_ctx, info.context_length))

    def models(self, settings: Settings, *, timeout: float) -> tuple[str, ...]:
        from netbox_chat.models.model_info import ModelInfoError, fetch_model_names

        try:
            return fetch_model_names(settings.ollama_url, timeout=timeout)
        except ModelInfoError as exc:
            raise UserFacingError(str(exc)) from exc

    def chat_model(
        self, settings: Settings, served: Served, *, reasoning: bool | str | None
    ) -> Any:
        from netbox_chat.models.ollama import build_model

        return build_model(settings, reasoning=reasoning, num_ctx=served.window)


class OpenAIProvider:
    """Any OpenAI-compatible server (models.dialects, models.openai)."""

    def served(self, settings: Settings, *, timeout: float) -> Served:
        from netbox_chat.models.dialects import ServerError, model_family, probe
        from netbox_chat.models.model_info import ModelInfo

        base_url = require_base_url(settings)
        try:
            facts = probe(base_url, settings.model, settings.api_key, timeout=timeout)
        except ServerError as exc:
            raise UserFacingError(str(exc)) from exc
        if not facts.serves_model:
            listed = ", ".join(facts.served[:8]) or "none"
            shown = without_userinfo(base_url, "***@")
            raise UserFacingError(
                f"{facts.speaks.name} at {shown} does not serve {settings.model} "
                f"(it serves: {listed}): pick one with {pick_model()}"
            )
        window = settings.context_window or facts.window or settings.num_ctx
        family = model_family(settings.model)
        # No OpenAI-compatible server says whether a model thinks: a family
        # known by its id does (thinking.plan_thinking plans from it), any
        # other is planned as a model that did not say.
        thinks = frozenset({"completion", "thinking"}) if family else None
        return Served(ModelInfo(settings.model, thinks, window, family), window, facts)

    def models(self, settings: Settings, *, timeout: float) -> tuple[str, ...]:
        from netbox_chat.models.dialects import ServerError, served_models

        try:
            return served_models(require_base_url(settings), settings.api_key, timeout=timeout)
        except ServerError as exc:
            raise UserFacingError(str(exc)) from exc

    def chat_model(
        self, settings: Settings, served: Served, *, reasoning: bool | str | None
    ) -> Any:
        from netbox_chat.models.openai import build_chat_model

        return build_chat_model(
            base_url=require_base_url(settings),
            model=settings.model,
            api_key=settings.api_key,
            dialect=served.facts.dialect if served.facts else "unknown",
            window=served.window,
            read_timeout=settings.request_timeout,
            reasoning=reasoning,
            max_tokens=settings.num_predict,
        )


def require_base_url(settings: Settings) -> str:
    if settings.base_url is None:
        raise UserFacingError(
            "provider openai needs base_url: pass --base-url http://HOST:PORT/v1 "
            "or set NETBOX_CHAT_BASE_URL"
        )
    return settings.base_url


PROVIDERS: dict[str, Provider] = {"ollama": OllamaProvider(), "openai": OpenAIProvider()}


def provider_for(settings: Settings) -> Provider:
    return PROVIDERS[settings.provider]


def set_thinking(model: Any, reasoning: bool | str | None) -> None:
    """A ThinkPlan's `reasoning` on a built chat model, from the next request
    on: ChatOllama sends its `reasoning` as `think`; ours words it per server
    (ChatOpenAICompatible.set_thinking)."""
    setter = getattr(model, "set_thinking", None)
    if callable(setter):
        setter(reasoning)
    else:
        model.reasoning = reasoning

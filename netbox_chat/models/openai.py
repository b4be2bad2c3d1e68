"""The chat model for any OpenAI-compatible server: langchain-openai's base
class, with what it leaves out for servers that are not OpenAI's.

`BaseChatOpenAI` (langchain-openai 1.7.4 and 1.8.1) drops `reasoning` and
`reasoning_content` from responses and never sends them back, asks for usage
while streaming only without a base_url, gives async streams a 120 s
per-chunk watchdog, and recognises none of these servers' "too long" answers
(docs/facts/model-servers.md, sections 2.2, 3.2, 4, 5).
`ChatOpenAICompatible` puts each back; the rest of the product sees the same
message shapes as from ChatOllama (thinking in
`additional_kwargs["reasoning_content"]`, usage in `usage_metadata`).

Importing this module costs LangChain's imports: built on the REPL's
background thread, like ChatOllama.
"""

from __future__ import annotations

import os
import re
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import urlsplit

import httpx
import openai
from langchain_core.callbacks import AsyncCallbackManagerForLLMRun
from langchain_core.exceptions import ContextOverflowError
from langchain_core.language_models import LanguageModelInput
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage
from langchain_core.outputs import ChatGenerationChunk
from langchain_openai.chat_models.base import BaseChatOpenAI
from pydantic import PrivateAttr, SecretStr

from netbox_chat.config import source_of, without_userinfo
from netbox_chat.errors import UserFacingError, pick_model
from netbox_chat.models.coalesce import CoalescingTransport, merge_sse_events
from netbox_chat.models.coldstart import recorder
from netbox_chat.models.dialects import DIALECTS, Dialect, busy_probe
from netbox_chat.models.liveness import PatientTransport, broke_off
from netbox_chat.visible import visible_line

REASONING_KEY = "reasoning_content"
"""Where a message keeps its thinking, as langchain-ollama keeps Ollama's
(thinking.REASONING_KEY): the renderer, the ledger and ThinkingMiddleware read it."""

REASONING_FIELDS = ("reasoning_content", "reasoning")
"""The fields servers stream reasoning in: llama.cpp and SGLang the first, vLLM
and Ollama the second, LM Studio either (facts, section 2.1)."""

NO_KEY = "sk-no-key-required"
"""What the SDK sends when no key is configured (llama-server's README uses
this placeholder). Never OPENAI_API_KEY from the environment: a key meant for
OpenAI must not go to whatever base_url names."""

# Each server's own words for a request longer than its window (facts, 3.2):
# llama-server `exceed_context_size_error` "request (N tokens) exceeds the
# available context size (M tokens)" (server-common.cpp); vLLM "This model's
# maximum context length is N tokens" (renderers/params.py); SGLang "The input
# (N tokens) is longer than the model's context length (M tokens)" and
# "Requested token count exceeds the model's maximum context length"
# (tokenizer_manager.py); LM Studio "...the model is loaded with context length
# of only N tokens, which is not enough" (lmstudio-bug-tracker #2322).
_OVERFLOW = re.compile(
    r"exceed_context_size_error|exceeds the available context size|maximum context length"
    r"|longer than the model's context length|context length of only",
    re.IGNORECASE,
)
# vLLM's 400 for `tools` without the flags (renderers/online_renderer.py).
_TOOLS_OFF = re.compile(r"enable-auto-tool-choice|tool-call-parser", re.IGNORECASE)


class WindowOverflow(ContextOverflowError):
    """The server refused the request as longer than its window: the context
    guard compacts and retries once (netbox_chat.agent.context)."""


class ChatOpenAICompatible(BaseChatOpenAI):
    """One OpenAI-compatible server in one dialect (models.dialects)."""

    dialect: str = "unknown"
    num_ctx: int | None = None
    """The session's window, as ChatOllama's `num_ctx` is: the summary request
    is sized to it (history._transcript_budget)."""
    _reasoning_field: str | None = PrivateAttr(default=None)
    """The field this server last streamed reasoning in: LM Studio uses either,
    per model, and reads back the one it writes."""

    @property
    def speaks(self) -> Dialect:
        return DIALECTS.get(self.dialect, DIALECTS["unknown"])

    def set_thinking(self, reasoning: bool | str | None) -> None:
        """A ThinkPlan's `reasoning`, in the fields this server reads
        (thinking_fields)."""
        self.reasoning_effort, self.extra_body = thinking_fields(self.dialect, reasoning)

    # Requests

    def _get_request_payload(
        self, input_: LanguageModelInput, *, stop: list[str] | None = None, **kwargs: Any
    ) -> dict[str, Any]:
        """The request, with each assistant message's reasoning in the field
        this server reads. ThinkingMiddleware has already removed the
        reasoning of earlier turns: what is left is the current turn's, which
        gpt-oss and Qwen3 expect back inside a tool loop (facts, 2.2)."""
        payload = super()._get_request_payload(input_, stop=stop, **kwargs)
        messages = self._convert_input(input_).to_messages()
        field = self._reasoning_field or self.speaks.reasoning_field
        for message, sent in zip(messages, payload.get("messages", []), strict=False):
            thinking = isinstance(message, AIMessage) and message.additional_kwargs.get(
                REASONING_KEY
            )
            if thinking and isinstance(thinking, str):
                sent[field] = thinking
        return payload

    # Responses

    def _convert_chunk_to_generation_chunk(
        self,
        chunk: dict[str, Any],
        default_chunk_class: type,
        base_generation_info: dict[str, Any] | None,
    ) -> ChatGenerationChunk | None:
        generation = super()._convert_chunk_to_generation_chunk(
            chunk, default_chunk_class, base_generation_info
        )
        choices = chunk.get("choices") or []
        delta = choices[0].get("delta") if choices and isinstance(choices[0], dict) else None
        if generation is None or not isinstance(delta, dict):
            return generation
        for field in REASONING_FIELDS:
            text = delta.get(field)
            if isinstance(text, str) and text:
                generation.message.additional_kwargs[REASONING_KEY] = text
                self._reasoning_field = field
                break
        return generation

    async def _astream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> AsyncIterator[ChatGenerationChunk]:
        """The stream, with the server's errors in words that name the fix,
        and a tool call a server left in the text refused (SGLang without
        --tool-call-parser returns it as content, serving_chat.py)."""
        content: list[str] = []
        called = False
        try:
            async for chunk in super()._astream(messages, stop, run_manager, **kwargs):
                message = chunk.message
                if isinstance(message, AIMessageChunk):
                    called = called or bool(message.tool_call_chunks)
                    content.append(message.text)
                yield chunk
        except openai.APIError as exc:
            raise self._error(exc) from exc
        except httpx.TimeoutException as exc:  # liveness.py's rule, mid-answer
            raise self._timed_out() from exc
        fix = self.speaks.tools_fix
        if fix and kwargs.get("tools") and not called and "<tool_call>" in "".join(content):
            raise UserFacingError(
                f"{self.speaks.name} returned a tool call as text: start it with {fix}"
            )

    def _error(self, exc: openai.APIError) -> Exception:
        """One line for the user, or WindowOverflow for the context guard."""
        server = self.speaks.name
        text = visible_line(_message(exc))[:300]
        if _OVERFLOW.search(text):
            return WindowOverflow(f"{server}: {text}")
        if isinstance(exc, openai.APITimeoutError):
            return self._timed_out()
        died = _broken_connection(exc)
        if died is not None:
            return died_mid_answer(server, died)
        if isinstance(exc, openai.APIConnectionError):
            shown = without_userinfo(self.openai_api_base or "", "***@")  # never in the ledger
            return UserFacingError(
                f"cannot reach {shown} ({text}): is the server running and "
                f"{source_of(None, 'base_url')} right?"
            )
        status = getattr(exc, "status_code", None)
        if status == 400 and _TOOLS_OFF.search(text):
            fix = self.speaks.tools_fix or DIALECTS["vllm"].tools_fix
            return UserFacingError(f"{server} refuses tool calls: start it with {fix}")
        if status in (401, 403):
            return UserFacingError(
                f"{server} refused the key ({status}): check api_key_env and the variable it names"
            )
        if status == 404:
            return UserFacingError(
                f"{server}: {text}: pick a model it serves with {pick_model()} "
                "(`netbox-chat doctor`)"
            )
        if status is not None:
            return UserFacingError(f"{server} answered {status}: {text}")
        return UserFacingError(f"{server} reported an error mid-answer: {text}")

    def _timed_out(self) -> UserFacingError:
        """The liveness rule gave up (liveness.PatientTransport): the server
        answered neither the request nor its probe, or stopped mid-answer."""
        return UserFacingError(
            f"{self.speaks.name} did not answer in time: it stopped answering, or stalled "
            f"mid-answer, for {source_of(None, 'request_timeout')} seconds; check the server, "
            "or raise it"
        )


TEMPLATE_SWITCH = frozenset({"llama.cpp", "vllm", "sglang"})
"""The servers that pass a request's `chat_template_kwargs` to the model's chat
template, where Qwen3's reads `enable_thinking` and gpt-oss's `reasoning_effort`
(llama-server README `chat_template_kwargs`, PR #13196; vLLM and SGLang
protocol.py; facts 2.1). Ollama's /v1 reads only `reasoning_effort`
(openai/openai.go:523-546); LM Studio's reading of either on
/v1/chat/completions is UNVERIFIED (facts 10), so it gets only the standard
`reasoning_effort`."""


def thinking_fields(
    dialect: str, reasoning: bool | str | None
) -> tuple[str | None, dict[str, Any] | None]:
    """(`reasoning_effort`, `extra_body`) for a ThinkPlan's `reasoning`, as
    `dialect` reads them (facts 2.1 and 9.4):

    - False: `reasoning_effort: "none"`, which llama.cpp, vLLM and SGLang turn
      into `enable_thinking: false` (vLLM protocol.py:645-666, SGLang
      protocol.py:974-986) and Ollama into `think: false`; the template switch
      is sent too where it is read, for servers that predate that.
    - True: `enable_thinking: true` where the template switch is read (it
      overrides a server started with thinking off by default,
      `--default-chat-template-kwargs`, llama-server `--reasoning off`); else the
      model's default, which is thinking for a thinking model.
    - A level (gpt-oss, planned by thinking.plan_thinking): `reasoning_effort`,
      which vLLM and SGLang put in gpt-oss's Harmony system message and Ollama
      sends as `think`; llama-server's gpt-oss template reads it as a template
      variable (`--chat-template-kwargs '{"reasoning_effort": "high"}'`), so it
      goes there too.
    - None: nothing; the model's default.
    """
    switch = dialect in TEMPLATE_SWITCH
    if reasoning is False:
        kwargs = {"chat_template_kwargs": {"enable_thinking": False}} if switch else None
        return "none", kwargs
    if reasoning is True:
        return None, {"chat_template_kwargs": {"enable_thinking": True}} if switch else None
    if isinstance(reasoning, str):
        if dialect == "llama.cpp":
            return reasoning, {"chat_template_kwargs": {"reasoning_effort": reasoning}}
        return reasoning, None
    return None, None


def _broken_connection(exc: BaseException) -> httpx.TransportError | None:
    """The server's hang-up behind an SDK error: the openai SDK words a
    connection closed mid-response as APIConnectionError("Connection error."),
    with httpx's RemoteProtocolError or ReadError as its cause."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, httpx.RemoteProtocolError | httpx.ReadError):
            return seen
        seen = seen.__cause__ or seen.__context__
    return None


def died_mid_answer(server: str, exc: BaseException) -> UserFacingError:
    """liveness.broke_off's line for this server, with httpx's own words."""
    text = visible_line(str(exc) or type(exc).__name__)[:300]
    return UserFacingError(broke_off(server, text, "the server's log"))


def _message(exc: openai.APIError) -> str:
    """The server's own words: the body's `error.message` or `message`, else
    the SDK's text. Shown as one line of text, never as terminal control."""
    body = exc.body
    if isinstance(body, dict):
        inner = body.get("error", body)
        found = inner.get("message") if isinstance(inner, dict) else inner
        if isinstance(found, str) and found.strip():
            return found.strip().splitlines()[0]
    text = str(exc.message or exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def sdk_timeout(read_timeout: float) -> tuple[float, float, float, float]:
    """The request time-outs, (connect, read, write, pool), as a plain tuple:
    the one form every HTTP stack the openai SDK has used takes. openai 3.60+
    builds httpx2 objects from what it is given (and langchain-openai its own
    default sync client from it), and httpx2 2.17 refuses an `httpx.Timeout`
    ("Invalid timeout"); our async client is an `httpx.AsyncClient`, which the
    SDK accepts as its legacy client (openai/_httpx2.py)."""
    return (10.0, read_timeout, read_timeout, read_timeout)


async def list_models_through(chat: ChatOpenAICompatible) -> None:
    """One small request (GET /models, no generation) through the SDK client
    and HTTP stack a turn's requests go through: `doctor` sends it, so a
    client the installed releases cannot build or send with fails there as
    every turn would, not as "unexpected error" at the first question."""
    try:
        await chat.root_async_client.models.list()
    finally:
        await chat.root_async_client.close()


def build_chat_model(
    *,
    base_url: str,
    model: str,
    api_key: str | None,
    dialect: str,
    window: int,
    read_timeout: float,
    reasoning: bool | str | None,
    max_tokens: int | None = None,
) -> ChatOpenAICompatible:
    """The session's chat model.

    - `stream_usage`: the server's own counts feed the meter, the calibration
      and the ledger (langchain-openai turns it off when base_url is set).
    - `stream_chunk_timeout=None`, and the async client's transport is
      liveness.PatientTransport with this server's probe
      (dialects.busy_probe): a silent server that says it is alive is waited
      for, with the status line saying so; `read_timeout` bounds only a server
      that answers nothing at all, or stops mid-answer. vLLM sends its headers
      before a prefill that can take minutes (facts, 4): the wait lasts until
      the first piece of the body. Around it, coalesce.CoalescingTransport:
      events that wait unread are joined, text to text.
    - `max_retries=0`: a retry re-submits the whole prompt; a failed request
      fails the turn, which is rolled back, as with Ollama.
    - `use_responses_api=False`: always /v1/chat/completions, whatever the
      model's name (facts, 2.2).
    - `max_tokens`: NETBOX_CHAT_NUM_PREDICT, as ChatOllama sends `num_predict`;
      a reply cut at it ends with `finish_reason: "length"`, which fails the
      turn (replies.cut_at_limit). `max_tokens`, not OpenAI's newer
      `max_completion_tokens`: all five servers read it (Ollama's /v1 as
      `num_predict`, openai/openai.go).
    """
    chat_path = f"{urlsplit(base_url).path.rstrip('/')}/chat/completions"
    chat = ChatOpenAICompatible(
        model=model,
        base_url=base_url,
        api_key=SecretStr(api_key or NO_KEY),
        dialect=dialect,
        num_ctx=window,
        temperature=0,
        max_tokens=max_tokens,
        streaming=True,
        stream_usage=True,
        stream_chunk_timeout=None,
        max_retries=0,
        use_responses_api=False,
        timeout=sdk_timeout(read_timeout),
        http_async_client=httpx.AsyncClient(
            # A reply read slower than it streams is read in fewer pieces (coalesce.py).
            transport=CoalescingTransport(
                PatientTransport(
                    busy_probe(base_url, dialect, api_key, read_timeout),
                    read_timeout,
                    paths=(chat_path,),
                    loaded=recorder(os.environ),  # the user's cold start, for doctor
                ),
                merge_sse_events,
                paths=(chat_path,),
            ),
            timeout=sdk_timeout(read_timeout),
        ),
    )
    chat.set_thinking(reasoning)
    return chat

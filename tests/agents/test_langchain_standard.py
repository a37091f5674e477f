"""LangChain's own standard chat-model suite (`langchain-tests`) against `ChatOpenAI` pointed at
Tandem: invoke, stream, batch, usage, stop, tool calling, tool choice, agent loop, structured
output (json_schema and function calling) and JSON mode, exactly as LangChain runs it.

Configuration, and why: `max_tokens` 160 keeps the suite's time bounded on a CPU (a JSON answer
is still complete: engines.grammar.constraint closes it before the budget); `has_tool_choice` is True (Tandem honours tool_choice, so the tests that
force a call ask for "any"); images, PDFs and audio are off (a text-only model).
Every test of the suite runs unchanged, the ones that check the values copied into a tool call
included (the 3 of "magic_function(3)", a customer's Chinese and Japanese names): the embedded
model trained for issue 37 copies them (docs/model.md)."""

from __future__ import annotations

import pytest
from langchain_openai import ChatOpenAI
from langchain_tests.integration_tests import ChatModelIntegrationTests


@pytest.fixture(scope="class")
def tandem_url(request, agents_url):
    request.cls.base_url = agents_url


@pytest.mark.usefixtures("tandem_url")
class TestTandemChatOpenAI(ChatModelIntegrationTests):
    base_url: str = ""

    @property
    def chat_model_class(self) -> type[ChatOpenAI]:
        return ChatOpenAI

    @property
    def chat_model_params(self) -> dict:
        return {"model": "tandem", "base_url": f"{self.base_url}/v1", "api_key": "sk-tandem", "temperature": 0, "max_retries": 0,
                "timeout": 300, "stream_usage": True, "max_tokens": 160}

    @property
    def has_tool_choice(self) -> bool:
        return True

    @property
    def supports_json_mode(self) -> bool:
        return True

    @property
    def supports_image_inputs(self) -> bool:
        return False

    @property
    def supports_image_urls(self) -> bool:
        return False

    @property
    def supports_pdf_inputs(self) -> bool:
        return False

    @property
    def supports_audio_inputs(self) -> bool:
        return False

    @property
    def supports_image_tool_message(self) -> bool:
        return False

    @property
    def supports_pdf_tool_message(self) -> bool:
        return False

    @property
    def supports_anthropic_inputs(self) -> bool:
        return False

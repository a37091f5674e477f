"""The OpenAI Agents SDK runs an agent with a function tool against Tandem, on the Responses API
(the SDK's default) and on chat completions: the tool is called with valid arguments, its result
goes back to the model, and the run finishes with a final answer."""

from __future__ import annotations

import asyncio

import pytest
from agents import Agent, ModelSettings, OpenAIChatCompletionsModel, OpenAIResponsesModel, RunConfig, Runner, function_tool
from openai import AsyncOpenAI


def weather_agent(model, calls: list) -> Agent:
    @function_tool
    def get_weather(location: str) -> str:
        """Get the weather at a location."""
        calls.append(location)
        return f"It's sunny in {location}."

    return Agent(name="weather", instructions="You are a helpful assistant.", model=model, tools=[get_weather],
                 model_settings=ModelSettings(temperature=0.0, max_tokens=120))


@pytest.mark.parametrize("api", ["responses", "chat_completions"])
def test_an_agent_calls_its_tool_and_finishes(agents_url, api):
    client = AsyncOpenAI(base_url=f"{agents_url}/v1", api_key="sk-tandem", max_retries=0, timeout=120)
    model = (OpenAIResponsesModel if api == "responses" else OpenAIChatCompletionsModel)(model="tandem", openai_client=client)
    calls: list[str] = []
    agent = weather_agent(model, calls)
    result = asyncio.run(Runner.run(agent, "What is the weather in San Francisco, CA?", max_turns=4,
                                    run_config=RunConfig(tracing_disabled=True)))
    assert calls and all(c.strip() for c in calls), f"the tool was never called with a location: {calls}"
    kinds = [item.type for item in result.new_items]
    assert "tool_call_item" in kinds and "tool_call_output_item" in kinds
    assert kinds[-1] == "message_output_item" and result.final_output.strip(), "the run ended without an answer"

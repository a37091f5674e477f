// Vercel's AI SDK (`ai` with `@ai-sdk/openai-compatible`) against a running Tandem app, one case
// per run: `node agent_sdk.mjs CASE` with TANDEM_URL set (http://127.0.0.1:PORT). Prints one JSON
// line with what the case saw; tests/agents/test_ai_sdk_js.py runs each case and checks that line.
// Cases: tools (generateText, two tools, several steps), object (generateObject, a zod schema),
// stream (streamText), forced (model id tandem-block), error (an unknown model).
import { createOpenAICompatible } from "@ai-sdk/openai-compatible";
import { APICallError, generateObject, generateText, stepCountIs, streamText, tool } from "ai";
import { z } from "zod";

const baseURL = `${process.env.TANDEM_URL}/v1`;
// supportsStructuredOutputs: Tandem answers response_format json_schema (the SDK otherwise sends json_object)
const tandem = createOpenAICompatible({ name: "tandem", baseURL, apiKey: "sk-tandem", supportsStructuredOutputs: true, includeUsage: true });
const settings = { temperature: 0, maxRetries: 0 };

const cases = {
  async tools() {
    const calls = [];
    const result = await generateText({
      model: tandem("tandem"),
      ...settings,
      maxOutputTokens: 120,
      tools: {
        get_weather: tool({
          description: "Get the current weather at a location.",
          inputSchema: z.object({ location: z.string().describe("City and country, e.g. Paris, France") }),
          execute: async ({ location }) => {
            calls.push({ tool: "get_weather", location });
            return `It is sunny and 21 C in ${location}.`;
          },
        }),
        get_time: tool({
          description: "Get the local time in a city.",
          inputSchema: z.object({ city: z.string().describe("The city") }),
          execute: async ({ city }) => {
            calls.push({ tool: "get_time", city });
            return `It is 14:05 in ${city}.`;
          },
        }),
      },
      // the first step must call a tool (tool_choice required); after its result the model decides
      prepareStep: ({ stepNumber }) => (stepNumber === 0 ? { toolChoice: "required" } : { toolChoice: "auto" }),
      stopWhen: stepCountIs(4),
      prompt: "What is the weather in Paris, France, and what time is it there?",
    });
    return {
      calls,
      steps: result.steps.map((s) => ({ finishReason: s.finishReason, toolCalls: s.toolCalls.length, toolResults: s.toolResults.length,
        errors: s.content.filter((p) => p.type === "tool-error").length })),
      text: result.text,
      finishReason: result.finishReason,
      usage: result.totalUsage,
    };
  },

  async object() {
    const schema = z.object({ name: z.string(), city: z.string() });
    const result = await generateObject({
      model: tandem("tandem"),
      ...settings,
      schema,
      schemaName: "person",
      prompt: "Extract the name and the city: Alice Smith moved to Paris last spring.",
    });
    return { object: result.object, valid: schema.safeParse(result.object).success, finishReason: result.finishReason };
  },

  async stream() {
    const result = streamText({ model: tandem("tandem-ar"), ...settings, maxOutputTokens: 24, prompt: "Write one sentence about the sea." });
    const parts = [];
    for await (const delta of result.textStream) parts.push(delta);
    return { parts, text: await result.text, finishReason: await result.finishReason, usage: await result.usage };
  },

  async forced() {
    const result = await generateText({ model: tandem("tandem-block"), ...settings, maxOutputTokens: 16,
      prompt: "Classify the sentiment: great phone." });
    return { mode: result.response.headers["x-tandem-mode"], model: result.response.modelId, text: result.text, finishReason: result.finishReason };
  },

  async error() {
    try {
      await generateText({ model: tandem("no-such-model"), ...settings, prompt: "Hello" });
      return { thrown: false };
    } catch (e) {
      return { thrown: true, name: e.name, isAPICallError: APICallError.isInstance(e), statusCode: e.statusCode,
        retryable: e.isRetryable, message: e.message };
    }
  },
};

const name = process.argv[2];
if (!cases[name]) {
  console.error(`usage: node agent_sdk.mjs ${Object.keys(cases).join("|")}`);
  process.exit(2);
}
console.log(JSON.stringify(await cases[name]()));

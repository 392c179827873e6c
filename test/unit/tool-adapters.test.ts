// The OpenAI and AI SDK adapters of the `subagent` tool, over a test double of its definition (no
// server): what they make of a tool call whose arguments are not a string, and of a definition
// that breaks its promise never to reject.
import { type SubagentToolDefinition, runOpenAIToolCall, toAiSdkTool, toolResult } from '../../src';

const parameters: SubagentToolDefinition['parameters'] = {
  type: 'object',
  properties: { prompt: { type: 'string', description: 'the task' } },
  required: ['prompt'],
  additionalProperties: false,
};
/** A definition (a test double) that answers with what it was given, or rejects when told to. */
const echo: SubagentToolDefinition = {
  name: 'subagent',
  description: 'A test double of the subagent tool.',
  parameters,
  async execute(args) {
    if ((args as { prompt?: unknown }).prompt === 'reject') throw new Error('the definition broke its promise');
    return toolResult(`did: ${(args as { prompt: string }).prompt}`);
  },
};

describe('runOpenAIToolCall', () => {
  it.each([
    ['null', null],
    ['an object', { prompt: 'x' }],
    ['a number', 7],
  ])('answers a call whose arguments are %s with an error message, and does not reject', async (_what, value) => {
    const call = { id: 'call-1', function: { name: 'subagent', arguments: value as unknown as string } };
    await expect(runOpenAIToolCall(echo, call, {})).resolves.toEqual({
      role: 'tool',
      tool_call_id: 'call-1',
      content: 'Error: invalid arguments: not a JSON string',
    });
  });

  it('answers a definition that rejects with an error message, and does not reject', async () => {
    const call = { id: 'call-2', function: { name: 'subagent', arguments: '{"prompt":"reject"}' } };
    await expect(runOpenAIToolCall(echo, call, {})).resolves.toEqual({
      role: 'tool',
      tool_call_id: 'call-2',
      content: 'Error: the definition broke its promise',
    });
  });
});

describe('toAiSdkTool', () => {
  it('throws the error of a definition that rejects, for the SDK to hand the model (its results waited for ever)', async () => {
    const tool = toAiSdkTool(echo, {});
    const results = tool.execute!({ prompt: 'reject' } as never, {
      toolCallId: 'call-3',
      messages: [],
    }) as AsyncIterable<unknown>;
    const outputs: unknown[] = [];
    await expect(
      (async () => {
        for await (const output of results) outputs.push(output);
      })(),
    ).rejects.toThrow('the definition broke its promise');
    expect(outputs).toEqual([]);
  });
});

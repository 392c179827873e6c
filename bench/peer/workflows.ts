// The peer's agent: a plain AI SDK tool loop run the way @temporalio/ai-sdk intends. Each model
// call goes through the integration's provider (one `invokeModel` activity per step); the tool's
// execute is an ordinary activity, as the integration's samples do it.
import { temporalProvider } from '@temporalio/ai-sdk/workflow';
import { proxyActivities } from '@temporalio/workflow';
import { generateText, isStepCount, jsonSchema, tool } from 'ai';
import type { PeerActivities } from './activities';

export interface PeerAgentInput {
  steps: number;
  model: string;
}

const { listDirectory } = proxyActivities<PeerActivities>({ startToCloseTimeout: '1 minute' });

const listDirectoryTool = tool({
  description: 'List the files in the working directory',
  inputSchema: jsonSchema<Record<string, never>>({ type: 'object', properties: {}, additionalProperties: false }),
  execute: () => listDirectory(),
});

/** Runs the loop until the model stops asking for the tool; returns how many model calls it made. */
export async function peerAgent(input: PeerAgentInput): Promise<number> {
  const result = await generateText({
    model: temporalProvider.languageModel(input.model),
    messages: [{ role: 'user', content: `steps=${input.steps}: list the directory until told to stop` }],
    tools: { list_directory: listDirectoryTool },
    // Headroom over the N calls the fake model makes, so the model, not the cap, ends the loop.
    stopWhen: isStepCount(input.steps + 5),
  });
  return result.steps.length;
}

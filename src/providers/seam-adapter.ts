// Hosts any in-process seam `SubagentProvider` (`start(request) → SubagentRun`) inside a worker as
// one activity per run: the run is durable (retried on another worker after a crash, cancellable,
// audited) though the provider itself is not. Steering and resume are not offered.
import type { ContentBlock } from '../seam/content';
import type { SubagentProvider, SubagentRunSettings, SubagentTurnProvider } from '../seam/provider';
import type { SubagentParent, SubagentParentRef, SubagentStartRequest } from '../seam/request';

export interface HostSeamProviderOptions {
  taskQueue?: string;
  runSettings?: SubagentRunSettings;
}

export function hostSeamProvider(
  provider: SubagentProvider,
  options: HostSeamProviderOptions = {},
): SubagentTurnProvider {
  return {
    name: provider.name,
    capabilities: provider.capabilities,
    inheritsParentContext: provider.inheritsParentContext,
    steering: false,
    resumable: false,
    ...(options.taskQueue === undefined ? {} : { taskQueue: options.taskQueue }),
    ...(options.runSettings === undefined ? {} : { runSettings: options.runSettings }),

    async runTurn(_input: ContentBlock[][], ctx) {
      const { request } = ctx;
      const seamRequest: SubagentStartRequest = {
        prompt: request.prompt,
        parent: parentAgent(request.parent),
        signal: ctx.signal,
        ...(request.agentOptions && { agentOptions: request.agentOptions }),
        ...(request.outputSchema && { outputSchema: request.outputSchema }),
        ...(request.maxDepth !== undefined && { maxDepth: request.maxDepth }),
        ...(request.toolFilter && { toolFilter: request.toolFilter }),
      };
      const run = provider.start(seamRequest);
      const onAbort = () => run.cancel('subagent cancelled');
      ctx.signal.addEventListener('abort', onAbort, { once: true });
      try {
        // The host validates `structured` against the run's schema before it counts.
        const { output, stopReason, diagnostic, structured } = await run.result;
        return {
          output,
          stopReason,
          ...(diagnostic === undefined ? {} : { diagnostic }),
          ...(structured === undefined ? {} : { structured }),
        };
      } finally {
        ctx.signal.removeEventListener('abort', onAbort);
        await run.dispose();
      }
    },
  };
}

/** The seam's `Agent` shape rebuilt from the serialised parent, as in-process providers read it. */
function parentAgent(parent: SubagentParentRef): SubagentParent {
  return {
    id: parent.agentId,
    options: { ...(parent.model === undefined ? {} : { model: parent.model }), subagentDepth: parent.depth },
    session: {
      header: { id: parent.sessionId ?? parent.agentId, ...(parent.cwd === undefined ? {} : { cwd: parent.cwd }) },
    },
    ...(parent.runId === undefined ? {} : { runId: parent.runId }),
  };
}

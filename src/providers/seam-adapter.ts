// Hosts any in-process seam `SubagentProvider` (`start(request) → SubagentRun`) inside a worker as
// one activity per run: the run is durable (retried on another worker after a crash, cancellable,
// audited) though the provider itself is not. Steering and resume are not offered.
import type { ContentBlock } from '../seam/content';
import type { SubagentProvider, SubagentRunSettings, SubagentTurnProvider } from '../seam/provider';
import { sessionLogOf } from '../seam/delegation';
import type {
  ResolvedSubagentRequest,
  SubagentParent,
  SubagentSessionEvent,
  SubagentStartRequest,
  TranscriptEntry,
} from '../seam/request';

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
        parent: parentAgent(request, provider.inheritsParentContext),
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

/**
 * The seam's `Agent` shape rebuilt from the serialised parent, as in-process providers read it.
 * For a provider that inherits its parent's context, `session.events` is the run's seed (the
 * parent's completed turns) as a session log, numbered from 0: a seam fork reads its seed there,
 * and would otherwise start from the prompt alone while the tool that delegated to it said it
 * inherits the conversation. No seed (the parent handed no log, or completed no turn) is [].
 */
function parentAgent(request: ResolvedSubagentRequest, inherits: boolean): SubagentParent {
  const { parent } = request;
  return {
    id: parent.agentId,
    options: { ...(parent.model === undefined ? {} : { model: parent.model }), subagentDepth: parent.depth },
    session: {
      header: { id: parent.sessionId ?? parent.agentId, ...(parent.cwd === undefined ? {} : { cwd: parent.cwd }) },
      ...(inherits ? { events: seedLog(request.seed?.entries ?? []) } : {}),
    },
    ...(parent.runId === undefined ? {} : { runId: parent.runId }),
  };
}

/**
 * `entries` as the seam's session log: each assistant message followed by a `tool/call` for each
 * call it makes, as a harness's log has them, and each event's `seq` its index.
 */
function seedLog(entries: readonly TranscriptEntry[]): SubagentSessionEvent[] {
  return sessionLogOf(entries)
    .flatMap((event): SubagentSessionEvent[] => {
      if (event.type !== 'assistant/message') return [event];
      const { content } = event.data as { content: ContentBlock[] };
      const calls = content.flatMap((block) =>
        block.type === 'tool-call'
          ? [{ type: 'tool/call', data: { callId: block.id, name: block.name, arguments: block.arguments } }]
          : [],
      );
      return [event, ...calls];
    })
    .map((event, seq) => ({ ...event, seq }));
}

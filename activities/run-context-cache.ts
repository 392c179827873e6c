// Worker-side cache of each run's request and conversation, so a turn's activity input carries a
// reference instead of the whole conversation. Exact-match only: a cache that is not precisely the
// workflow's conversation before the turn is refetched whole, so a stale entry is never used.
import type { ResolvedSubagentRequest, TranscriptEntry } from '../src/seam/request';
import type { TurnActivityInput } from './types';

export interface CachedRunContext {
  request: ResolvedSubagentRequest;
  entries: TranscriptEntry[];
}

export class RunContextCache {
  private readonly runs = new Map<string, CachedRunContext>();

  constructor(private readonly maxRuns = 256) {}

  /** The cached context if it is exactly the conversation `ref` describes, else undefined. */
  lookup(runId: string, ref: TurnActivityInput['transcript']): CachedRunContext | undefined {
    const cached = this.runs.get(runId);
    if (!cached || cached.entries.length !== ref.length) return undefined;
    const lastAssistant = cached.entries.findLast((entry) => entry.kind === 'assistant');
    if (lastAssistant?.id !== ref.lastAssistantId) return undefined;
    // Refresh recency: Map iteration order is insertion order, the oldest is evicted first.
    this.runs.delete(runId);
    this.runs.set(runId, cached);
    return cached;
  }

  put(runId: string, context: CachedRunContext): void {
    this.runs.delete(runId);
    this.runs.set(runId, context);
    while (this.runs.size > this.maxRuns) this.runs.delete(this.runs.keys().next().value!);
  }

  get size(): number {
    return this.runs.size;
  }
}

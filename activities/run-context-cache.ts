// Worker-side cache of each run's request and conversation, so a turn's activity input carries a
// reference instead of the whole conversation. Exact-match only: a cache that is not precisely the
// workflow's conversation before the turn is refetched whole, so a stale entry is never used.
import type { ToolResultBlock } from '../src/seam/content';
import type { ResolvedSubagentRequest, TranscriptEntry } from '../src/seam/request';
import type { TurnActivityInput } from './types';

export interface CachedRunContext {
  request: ResolvedSubagentRequest;
  entries: TranscriptEntry[];
}

/** Tool results kept for the next model call, at most: each is taken by the call that follows it. */
const MAX_TOOL_RESULTS = 1024;
/**
 * Their JSON's length in all, at most. A result whose next model call runs on another worker (its
 * endpoint's own task queue, a fleet) is never taken here: a count alone let a worker keep 1,024
 * results of up to a payload each, gigabytes. One the cache has lost is read from the workflow.
 */
const MAX_TOOL_RESULT_CHARS = 64 * 1024 * 1024;
/** User messages kept for the next activity, at most, over all runs: their JSON's length in all. */
const MAX_USER_ENTRY_CHARS = 16 * 1024 * 1024;
/**
 * Conversations kept, at most: their requests' and entries' JSON length in all. A count of runs
 * alone let a worker keep 256 conversations of many megabytes each. One the cache has dropped is
 * read from the workflow at its run's next activity.
 */
const MAX_RUN_CHARS = 256 * 1024 * 1024;

/** The JSON length of each request and entry measured: a conversation grows, its entries stay. */
const measured = new WeakMap<object, number>();
const charsOf = (value: object): number => {
  let chars = measured.get(value);
  if (chars === undefined) measured.set(value, (chars = JSON.stringify(value).length));
  return chars;
};

export class RunContextCache {
  private readonly runs = new Map<string, { context: CachedRunContext; chars: number }>();
  private runChars = 0;
  private readonly toolResults = new Map<string, { result: ToolResultBlock; chars: number }>();
  private toolResultChars = 0;
  /** By workflow run (a reset or a continue-as-new is a run of its own) and conversation position. */
  private readonly userEntries = new Map<string, { entry: TranscriptEntry; chars: number }>();
  private userEntryChars = 0;

  constructor(private readonly maxRuns = 256) {}

  /** Keeps a tool result this worker produced (or answered) for the run's next model call. */
  putToolResult(runId: string, resultId: string, result: ToolResultBlock): void {
    const key = `${runId}/${resultId}`;
    const chars = JSON.stringify(result).length;
    this.dropToolResult(key);
    if (chars > MAX_TOOL_RESULT_CHARS) return;
    this.toolResults.set(key, { result, chars });
    this.toolResultChars += chars;
    while (this.toolResults.size > MAX_TOOL_RESULTS || this.toolResultChars > MAX_TOOL_RESULT_CHARS) {
      this.dropToolResult(this.toolResults.keys().next().value!);
    }
  }

  /** The results named by `resultIds`, in order, if this worker has every one; else undefined. */
  toolResultsFor(runId: string, resultIds: readonly string[]): ToolResultBlock[] | undefined {
    const found = resultIds.map((id) => this.toolResults.get(`${runId}/${id}`)?.result);
    return found.every((result) => result !== undefined) ? (found as ToolResultBlock[]) : undefined;
  }

  /** Forgets results a model call has sent: it cached the conversation they are now part of. */
  dropToolResults(runId: string, resultIds: readonly string[]): void {
    for (const id of resultIds) this.dropToolResult(`${runId}/${id}`);
  }

  private dropToolResult(key: string): void {
    const kept = this.toolResults.get(key);
    if (!kept) return;
    this.toolResults.delete(key);
    this.toolResultChars -= kept.chars;
  }

  /**
   * Keeps user messages the workflow run `executionRunId` appended at `position` of its
   * conversation (told through a sink as it appended them), for the activity that sends them.
   */
  putUserEntries(executionRunId: string, position: number, entries: readonly TranscriptEntry[]): void {
    entries.forEach((entry, i) => {
      const chars = JSON.stringify(entry).length;
      // One too large for the cache is read from the workflow instead.
      if (chars > MAX_USER_ENTRY_CHARS) return;
      this.dropUserEntry(`${executionRunId}@${position + i}`);
      this.userEntries.set(`${executionRunId}@${position + i}`, { entry, chars });
      this.userEntryChars += chars;
    });
    while (this.userEntryChars > MAX_USER_ENTRY_CHARS) this.dropUserEntry(this.userEntries.keys().next().value!);
  }

  /** The user message at `position` of the workflow run's conversation, taken out of the cache. */
  takeUserEntry(executionRunId: string, position: number): TranscriptEntry | undefined {
    const key = `${executionRunId}@${position}`;
    const kept = this.userEntries.get(key);
    this.dropUserEntry(key);
    return kept?.entry;
  }

  private dropUserEntry(key: string): void {
    const kept = this.userEntries.get(key);
    if (!kept) return;
    this.userEntries.delete(key);
    this.userEntryChars -= kept.chars;
  }

  /** The cached context if it is exactly the conversation `ref` describes, else undefined. */
  lookup(runId: string, ref: TurnActivityInput['transcript']): CachedRunContext | undefined {
    const kept = this.runs.get(runId);
    const cached = kept?.context;
    if (!cached || cached.entries.length !== ref.length) return undefined;
    const lastAssistant = cached.entries.findLast((entry) => entry.kind === 'assistant');
    if (lastAssistant?.id !== ref.lastAssistantId) return undefined;
    // Refresh recency: Map iteration order is insertion order, the oldest is evicted first.
    this.runs.delete(runId);
    this.runs.set(runId, kept);
    return cached;
  }

  /** Keeps run `runId`'s context, dropping the least recently used past `maxRuns` or `MAX_RUN_CHARS`. */
  put(runId: string, context: CachedRunContext): void {
    this.dropRun(runId);
    const chars = context.entries.reduce((sum, entry) => sum + charsOf(entry), charsOf(context.request));
    // One too large for the cache is read from the workflow instead.
    if (chars > MAX_RUN_CHARS) return;
    this.runs.set(runId, { context, chars });
    this.runChars += chars;
    while (this.runs.size > this.maxRuns || this.runChars > MAX_RUN_CHARS) this.dropRun(this.runs.keys().next().value!);
  }

  private dropRun(runId: string): void {
    const kept = this.runs.get(runId);
    if (!kept) return;
    this.runs.delete(runId);
    this.runChars -= kept.chars;
  }

  get size(): number {
    return this.runs.size;
  }
}

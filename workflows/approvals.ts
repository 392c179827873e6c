// Tool calls parked until a person (or the parent) approves them. The workflow holds each request
// durably, with no activity in flight, for as long as its deadline allows; every request and
// decision is one memo change in history, where `run.events()` and the audit read it, and the
// run's status attribute says `awaiting-approval` while one waits.
import {
  ApplicationFailure,
  CancellationScope,
  condition,
  upsertMemo,
  upsertSearchAttributes,
  workflowInfo,
} from '@temporalio/workflow';
import { MAX_APPROVAL_REASON_CHARS, isWholeNumber } from '../src/seam/constants';
import type { SubagentApprovalDecision, SubagentApprovalRequest } from '../src/seam/result';
import type { RequestApprovalArgs } from '../activities/types';
import { APPROVAL_MEMO_KEY, type ApprovalMemo, type ApproveArgs, SETTLED_MEMO_KEY } from './definitions';
import { STATUS_ATTRIBUTE } from './search-attributes';

/** What a call that asks for approval shows the person deciding. */
export interface ApprovalCall {
  tool: string;
  arguments: string;
  kind?: string;
}

/** For runs started before approvals existed, whose settings carry no timeout (the facade's default). */
const DEFAULT_APPROVAL_TIMEOUT_MS = 24 * 60 * 60 * 1000;
/** The most request ids an unknown request's refusal lists. */
const LISTED_REQUESTS = 20;

interface Entry {
  request: SubagentApprovalRequest;
  /** The turn that asked. */
  turn: number;
  decision?: SubagentApprovalDecision;
  /** Whether the decision's memo change is written. */
  recorded?: boolean;
}

export class Approvals {
  /**
   * By the request's own part of its id: the run's id is its workflow id, which a replay of a
   * recorded history may run under another name.
   */
  private readonly requests = new Map<string, Entry>();

  constructor(
    private readonly runId: string,
    private readonly timeoutMs = DEFAULT_APPROVAL_TIMEOUT_MS,
    /** Whether the run keeps search attributes (the caller set them at start). */
    private readonly indexed: boolean,
  ) {}

  /** The turn-based provider's turn now running, whose provider may ask (`askInTurn`). */
  private openTurn: number | undefined;

  /** The requests no one has decided yet, oldest first. */
  pending(): SubagentApprovalRequest[] {
    return [...this.requests.values()].filter((entry) => !entry.decision).map((entry) => entry.request);
  }

  /**
   * Parks until request `local` (unique in the run, the same on replay) is decided: by `decide`,
   * by its deadline (denied), or by `endTurn`. Asked again while it waits, joins the first ask.
   * A cancel of the scope it waits in denies it (`turn-ended`) and rethrows.
   */
  async ask(local: string, turn: number, call: ApprovalCall): Promise<SubagentApprovalDecision> {
    const requestId = `${this.runId}/${local}`;
    let entry = this.requests.get(local);
    if (!entry) {
      const request: SubagentApprovalRequest = {
        requestId,
        tool: call.tool,
        arguments: call.arguments,
        ...(call.kind === undefined ? {} : { kind: call.kind }),
        deadline: Date.now() + this.timeoutMs,
      };
      entry = { request, turn };
      this.requests.set(local, entry);
      this.record({ state: 'requested', ...request });
      if (this.pending().length === 1) this.setStatus('awaiting-approval');
    }
    const waiting = entry;
    try {
      const answered = await condition(
        () => waiting.decision !== undefined,
        Math.max(waiting.request.deadline - Date.now(), 0),
      );
      if (!answered) this.settle(waiting, { decision: 'deny', by: 'timeout', reason: 'no answer in time' });
    } catch (err) {
      if (CancellationScope.current().consideredCancelled) {
        this.settle(waiting, { decision: 'deny', by: 'turn-ended', reason: 'the run was stopped' });
        this.recordDecision(waiting);
      }
      throw err;
    }
    this.recordDecision(waiting);
    return waiting.decision!;
  }

  /**
   * A turn's provider asks (`requestApprovalUpdate`). A request that arrives after its turn
   * stopped is denied at once: nothing is left to take the answer.
   */
  askInTurn(local: string, turn: number, call: ApprovalCall): Promise<SubagentApprovalDecision> {
    if (turn !== this.openTurn) {
      return Promise.resolve({
        requestId: `${this.runId}/${local}`,
        decision: 'deny',
        by: 'turn-ended',
        reason: 'the turn stopped first',
      });
    }
    return this.ask(local, turn, call);
  }

  /**
   * Refuses a request no turn's provider makes (a raw client's: null, no arguments, a field of
   * another type): in `askInTurn` it failed every workflow task of the run, so that nothing else,
   * a dispose included, reached the run while the request waited.
   */
  validateAsk(args: unknown): void {
    const { turn, key, tool, arguments: input, kind } = (args ?? {}) as Partial<RequestApprovalArgs>;
    const strings = [key, tool, input].every((field) => typeof field === 'string');
    if (!(isWholeNumber(turn, 0) && strings && (kind === undefined || typeof kind === 'string'))) {
      throw ApplicationFailure.nonRetryable(
        'an approval request is { turn, key, tool, arguments, kind? }: a whole number, then text',
        'INVALID_REQUEST',
      );
    }
  }

  beginTurn(turn: number): void {
    this.openTurn = turn;
  }

  /** Answers a request; a request decided already keeps its decision. Throws `UNKNOWN_APPROVAL` for one never made. */
  decide({ requestId, decision, reason }: ApproveArgs): SubagentApprovalDecision {
    // Only the request here: answers taken before the validator checked more replay as they were.
    this.validateRequest(requestId);
    const entry = this.requests.get(localOf(requestId))!;
    return this.settle(entry, { decision, by: 'caller', ...(reason === undefined ? {} : { reason }) });
  }

  /**
   * Refuses an answer before it reaches history (a validator runs only when the update arrives,
   * never in replay): a request never made, a decision that is neither, a reason over
   * `MAX_APPROVAL_REASON_CHARS` (a raw client's: ours cut it), an answer that is not
   * `{ requestId, decision, reason? }` (a raw client's null, which the SDK refused with its own TypeError).
   */
  validate(args: unknown): void {
    const { requestId, decision, reason } = (args ?? {}) as Partial<ApproveArgs>;
    if (typeof requestId !== 'string') {
      throw ApplicationFailure.nonRetryable(
        'an approval answer is { requestId, decision, reason? }',
        'INVALID_REQUEST',
      );
    }
    if (decision !== 'allow' && decision !== 'deny') {
      throw ApplicationFailure.nonRetryable('an approval decision is "allow" or "deny"', 'INVALID_REQUEST');
    }
    if (reason !== undefined && !(typeof reason === 'string' && reason.length <= MAX_APPROVAL_REASON_CHARS)) {
      throw ApplicationFailure.nonRetryable(
        `an approval reason is a string of at most ${MAX_APPROVAL_REASON_CHARS} characters`,
        'INVALID_REQUEST',
      );
    }
    this.validateRequest(requestId);
  }

  private validateRequest(requestId: string): void {
    if (this.requests.has(localOf(requestId))) return;
    // The newest requests only: a run may have made thousands.
    const known = [...this.requests.values()].map((entry) => entry.request.requestId);
    const listed = known.slice(-LISTED_REQUESTS).join(', ');
    const more = known.length > LISTED_REQUESTS ? ` and ${known.length - LISTED_REQUESTS} before them` : '';
    throw ApplicationFailure.nonRetryable(
      `run ${this.runId} has no approval request ${String(requestId).slice(0, 200)}${known.length > 0 ? ` (requests: ${listed}${more})` : ''}`,
      'UNKNOWN_APPROVAL',
    );
  }

  /** Denies what `turn` still waits for: the turn that asked has stopped, so nobody takes the answer. */
  endTurn(turn: number): void {
    if (this.openTurn === turn) this.openTurn = undefined;
    for (const entry of this.requests.values()) {
      if (entry.turn === turn && !entry.decision) {
        this.settle(entry, { decision: 'deny', by: 'turn-ended', reason: 'the turn stopped first' });
      }
    }
  }

  /** Sets the decision, unless one is set; the asks waiting on it record it (`recordDecision`). */
  private settle(entry: Entry, decided: Omit<SubagentApprovalDecision, 'requestId'>): SubagentApprovalDecision {
    entry.decision ??= { requestId: entry.request.requestId, ...decided };
    return entry.decision;
  }

  /** The decision's memo change, once however many asks wake on it; the status once none waits. */
  private recordDecision(entry: Entry): void {
    if (entry.recorded) return;
    entry.recorded = true;
    this.record({ state: 'decided', ...entry.decision! });
    if (this.pending().length === 0) this.setStatus('running');
  }

  /** One memo change: one history event, the record readers and the audit see. */
  private record(change: ApprovalMemo): void {
    upsertMemo({ [APPROVAL_MEMO_KEY]: change });
  }

  private setStatus(status: 'awaiting-approval' | 'running'): void {
    if (this.indexed) upsertSearchAttributes([{ key: STATUS_ATTRIBUTE, value: status }]);
  }
}

/** A request id's own part: what follows its run's id. */
function localOf(requestId: string): string {
  return requestId.slice(requestId.lastIndexOf('/') + 1);
}

/**
 * The memo a continued run starts with: the run's own, without the last approval change or the
 * last settle record (each is a change of the run it was made in).
 */
export function carriedMemo(): Record<string, unknown> | undefined {
  const memo = workflowInfo().memo;
  if (!memo || !(APPROVAL_MEMO_KEY in memo || SETTLED_MEMO_KEY in memo)) return memo;
  const { [APPROVAL_MEMO_KEY]: _approval, [SETTLED_MEMO_KEY]: _settled, ...rest } = memo;
  return rest;
}

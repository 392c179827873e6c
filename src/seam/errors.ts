// The one error family of the seam. Callers route on `code`, never on message text or on
// `instanceof` across sandboxes; subclasses exist only where they carry typed fields.

/** Every code a caller can meet, with where it comes from. */
export const SUBAGENT_ERROR_CODES = {
  /** `start`/`getProvider`-by-name: no provider registered under that name. */
  NO_PROVIDER: 'NO_PROVIDER',
  /** `registerProvider`: the name is taken. */
  DUPLICATE_PROVIDER: 'DUPLICATE_PROVIDER',
  /** `start`: the request uses a start-time capability the provider lacks. */
  UNSUPPORTED_CAPABILITY: 'UNSUPPORTED_CAPABILITY',
  /** `start`, `sendMessage`, `resume`: a malformed request field. */
  INVALID_REQUEST: 'INVALID_REQUEST',
  /** Service, provider or worker options that cannot work (a negative timeout, say). */
  INVALID_CONFIG: 'INVALID_CONFIG',
  /** `start`, `sendMessage`, `resume`: the payload would exceed Temporal's per-payload limit. */
  PAYLOAD_TOO_LARGE: 'PAYLOAD_TOO_LARGE',
  /** `start`: `toolFilter` names a tool the provider does not have. */
  UNKNOWN_TOOL: 'UNKNOWN_TOOL',
  /** `start`: the child would be deeper than `maxDepth` (`SubagentDepthError`). */
  DEPTH_EXCEEDED: 'DEPTH_EXCEEDED',
  /** `start`: the output schema is outside the supported subset (`OutputSchemaError`). */
  UNSUPPORTED_SCHEMA: 'UNSUPPORTED_SCHEMA',
  /** `start` with an `idempotencyKey` already used for a different request (`result` rejects). */
  IDEMPOTENCY_CONFLICT: 'IDEMPOTENCY_CONFLICT',
  /** `attach` and every run operation: no run with that id exists. */
  UNKNOWN_RUN: 'UNKNOWN_RUN',
  /** `approve`: no pending or decided approval request with that id in the run or below it. */
  UNKNOWN_APPROVAL: 'UNKNOWN_APPROVAL',
  /** `resume`: the run is still running, was closed, or its resume window has passed. */
  NOT_RESUMABLE: 'NOT_RESUMABLE',
  /** `sendMessage`: the run's result has already settled; use `resume`. */
  NOT_RUNNING: 'NOT_RUNNING',
  /** `result` and the launcher: the Temporal server could not be reached or refused the call. */
  UNAVAILABLE: 'UNAVAILABLE',
  /** Any run operation: the server refused the call for one of its limits (a rate, updates per run); nothing changed. */
  RESOURCE_EXHAUSTED: 'RESOURCE_EXHAUSTED',
  /** `result` and any read of a run: a payload its history refers to is gone from the payload store. */
  PAYLOAD_MISSING: 'PAYLOAD_MISSING',
  /** Any read of a run: a payload that is not encrypted where encryption is on (refused, not decoded). */
  PAYLOAD_NOT_ENCRYPTED: 'PAYLOAD_NOT_ENCRYPTED',
} as const;

export type SubagentErrorCode = (typeof SUBAGENT_ERROR_CODES)[keyof typeof SUBAGENT_ERROR_CODES];

/** Base of every error that carries a stable `code` (the seam's `HarnessError`). */
export class HarnessError extends Error {
  readonly code: string;
  constructor(message: string, code: string, options?: ErrorOptions) {
    super(message, options);
    this.name = 'HarnessError';
    this.code = code;
  }
}

export class SubagentError extends HarnessError {
  declare readonly code: SubagentErrorCode;
  constructor(message: string, code: SubagentErrorCode, options?: ErrorOptions) {
    super(message, code, options);
    this.name = 'SubagentError';
  }
}

/** Thrown by `start` when the child's depth (parent depth + 1) exceeds the request's `maxDepth`. */
export class SubagentDepthError extends SubagentError {
  readonly attemptedDepth: number;
  readonly maxDepth: number;
  constructor(attemptedDepth: number, maxDepth: number) {
    super(`subagent depth ${attemptedDepth} exceeds maxDepth ${maxDepth}`, 'DEPTH_EXCEEDED');
    this.name = 'SubagentDepthError';
    this.attemptedDepth = attemptedDepth;
    this.maxDepth = maxDepth;
  }
}

/** Thrown by `start` when an output schema is outside the supported subset; `violations` lists every problem. */
export class OutputSchemaError extends SubagentError {
  declare readonly code: 'UNSUPPORTED_SCHEMA';
  readonly violations: string[];
  constructor(violations: readonly string[], options?: ErrorOptions) {
    super(`unsupported output schema: ${violations.join('; ')}`, 'UNSUPPORTED_SCHEMA', options);
    this.name = 'OutputSchemaError';
    this.violations = [...violations];
  }
}

export function isSubagentError(err: unknown, code?: SubagentErrorCode): err is SubagentError {
  return err instanceof SubagentError && (code === undefined || err.code === code);
}

/**
 * An error and its causes, outermost first: a Temporal failure often carries the reason a cause
 * or two deep (an ActivityFailure wraps the provider's failure, a ServiceError the server's).
 */
export function causeChain(err: unknown): Error[] {
  const chain: Error[] = [];
  for (let e: unknown = err; e instanceof Error && !chain.includes(e); e = e.cause) chain.push(e);
  return chain;
}

/**
 * What a thrown value says, whatever it is: an Error's message, a string, or, for an Error whose
 * message getter throws or a Proxy, what can be read of it.
 */
export function messageOf(err: unknown): string {
  try {
    return err instanceof Error ? err.message : String(err);
  } catch {
    try {
      return Object.prototype.toString.call(err);
    } catch {
      return 'a value that cannot be read';
    }
  }
}

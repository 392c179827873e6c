// The service's observe-only events. Listeners are called one by one; a throwing listener is
// logged and skipped (contained), except for provider-added, whose throw rolls a registration back.
import { SubagentError } from '../seam/errors';
import { describeValue } from '../seam/json';
import type { SubagentProviderDescriptor } from '../seam/provider';
import type { SubagentLogger, SubagentMessageUndeliveredInfo, SubagentRunEndInfo, SubagentRunInfo } from '../seam/run';

export interface SubagentServiceEvents {
  'subagent/provider-added': [provider: SubagentProviderDescriptor];
  'subagent/provider-removed': [name: string];
  'subagent/start': [info: SubagentRunInfo];
  'subagent/end': [info: SubagentRunEndInfo];
  /** A steering message that could not be delivered, after every retry; its content is in it. */
  'subagent/message-undelivered': [info: SubagentMessageUndeliveredInfo];
}

export type SubagentEventName = keyof SubagentServiceEvents;
export type SubagentEventListener<E extends SubagentEventName> = (...args: SubagentServiceEvents[E]) => void;

/** Every event the service emits (keys of a record, so that the compiler holds the list whole). */
const EVENT_NAMES: readonly string[] = Object.keys({
  'subagent/provider-added': true,
  'subagent/provider-removed': true,
  'subagent/start': true,
  'subagent/end': true,
  'subagent/message-undelivered': true,
} satisfies Record<SubagentEventName, true>);

export class SubagentEvents {
  private readonly listeners = new Map<SubagentEventName, Set<(...args: any[]) => void>>();

  constructor(private readonly logger: SubagentLogger) {}

  /**
   * Adds a listener; returns its remover. Throws `INVALID_CONFIG` for an event the service never
   * emits (a typo heard nothing) or a listener that is not a function: a provider-added listener of
   * 5 made every later `registerProvider` throw a TypeError, and roll back.
   */
  on<E extends SubagentEventName>(event: E, listener: SubagentEventListener<E>): () => void {
    if (!EVENT_NAMES.includes(event)) {
      throw new SubagentError(
        `no service event is named ${describeValue(event)} (events: ${EVENT_NAMES.join(', ')})`,
        'INVALID_CONFIG',
      );
    }
    if (typeof listener !== 'function') {
      throw new SubagentError(
        `a listener of ${event} must be a function (got ${describeValue(listener)})`,
        'INVALID_CONFIG',
      );
    }
    let set = this.listeners.get(event);
    if (!set) this.listeners.set(event, (set = new Set()));
    set.add(listener);
    return () => set.delete(listener);
  }

  /** Calls every listener; the first throw propagates and stops the rest. */
  emit<E extends SubagentEventName>(event: E, ...args: SubagentServiceEvents[E]): void {
    for (const listener of [...(this.listeners.get(event) ?? [])]) listener(...args);
  }

  /** Calls every listener; a throw is logged and the next listener still runs. */
  emitContained<E extends SubagentEventName>(event: E, ...args: SubagentServiceEvents[E]): void {
    for (const listener of [...(this.listeners.get(event) ?? [])]) {
      try {
        listener(...args);
      } catch (err) {
        this.logger.warn(`subagent: ${event} listener threw: ${err}`, { event, error: err });
      }
    }
  }
}

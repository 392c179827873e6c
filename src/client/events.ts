// The service's observe-only events. Listeners are called one by one; a throwing listener is
// logged and skipped (contained), except for provider-added, whose throw rolls a registration back.
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

export class SubagentEvents {
  private readonly listeners = new Map<SubagentEventName, Set<(...args: any[]) => void>>();

  constructor(private readonly logger: SubagentLogger) {}

  /** Adds a listener; returns its remover. */
  on<E extends SubagentEventName>(event: E, listener: SubagentEventListener<E>): () => void {
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

import { proxyActivities, defineUpdate, defineSignal, setHandler, condition, CancellationScope, isCancellation, allHandlersFinished, continueAsNew, workflowInfo } from '@temporalio/workflow';
const { slow } = proxyActivities<{ slow(ms: number): Promise<string> }>({ startToCloseTimeout: '1m', heartbeatTimeout: '5s', retry: { maximumAttempts: 1 } });
export const resultUpdate = defineUpdate<string, [number]>('result');
export const closeSignal = defineSignal('close');
export async function probe(mode: string, gen = 0): Promise<string> {
  let done: string | undefined; let close = false;
  setHandler(resultUpdate, async (g) => { await CancellationScope.nonCancellable(() => condition(() => done !== undefined)); return `${done} gen=${gen}`; });
  setHandler(closeSignal, () => { close = true; });
  try {
    done = await slow(mode === 'fast' ? 10 : 3000);
  } catch (e) {
    done = isCancellation(e) ? 'cancelled' : 'failed:' + (e as Error).message;
  }
  if (mode === 'can' && gen === 0) { await condition(allHandlersFinished); await continueAsNew<typeof probe>('fast', 1); }
  if (mode === 'park') { try { await condition(() => close, 60000) } catch (e) { return 'park-cancelled' } }
  await CancellationScope.nonCancellable(() => condition(allHandlersFinished));
  return `final:${done}`;
}

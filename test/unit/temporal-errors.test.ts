// What the Temporal client throws, as the seam's typed errors: a server limit is its own code,
// never an outage, and never retried as one.
import { WorkflowNotFoundError } from '@temporalio/client';
import {
  isTaskFailing,
  isUnreachable,
  isUpdateDropped,
  ridingOutOutages,
  sendAgainIfDropped,
  toSubagentError,
  unknownSearchAttribute,
} from '../../src/temporal/errors';
import { OpenActivities, isStalePageToken } from '../../src/temporal/run-history';

/** A gRPC error as the client surfaces it: a status code, maybe wrapped. */
const grpcError = (code: number, message: string) => Object.assign(new Error(message), { code });

it('maps RESOURCE_EXHAUSTED anywhere in the cause chain to its own code, not UNAVAILABLE', () => {
  const limit = grpcError(8, 'limit on number of concurrent in-flight updates has been reached (10)');
  const wrapped = new Error('Workflow Update failed', { cause: limit });
  for (const err of [limit, wrapped]) {
    expect(isUnreachable(err)).toBe(false);
    expect(toSubagentError(err, 'subagent-x:1')).toMatchObject({
      code: 'RESOURCE_EXHAUSTED',
      message: expect.stringContaining('in-flight updates'),
    });
  }
});

it('keeps an unreachable server UNAVAILABLE and a missing workflow UNKNOWN_RUN', () => {
  const down = grpcError(14, 'connection refused');
  expect(isUnreachable(down)).toBe(true);
  expect(toSubagentError(down, 'subagent-x:1').code).toBe('UNAVAILABLE');
  expect(toSubagentError(new WorkflowNotFoundError('gone', 'subagent-x:1', undefined), 'subagent-x:1').code).toBe(
    'UNKNOWN_RUN',
  );
});

it('reads a connection that broke under a call in flight as an unreachable server', () => {
  // As a history long poll fails when the frontend it waits on is killed.
  const broken = grpcError(13, 'transport error');
  expect(isUnreachable(broken)).toBe(true);
  expect(isUnreachable(new Error('Temporal call failed', { cause: broken }))).toBe(true);
  expect(isUnreachable(grpcError(13, 'an internal error'))).toBe(false);
});

it('tells an update that a failed workflow task dropped from a failing task and from other refused preconditions', () => {
  // As the server aborts an update that rode in a workflow task whose completion it refused.
  const dropped = new Error('Workflow Update failed', {
    cause: grpcError(9, 'Unable to perform workflow execution update due to unexpected workflow task failure.'),
  });
  expect(isUpdateDropped(dropped)).toBe(true);
  expect(isTaskFailing(dropped)).toBe(false);
  expect(
    isUpdateDropped(grpcError(9, 'Unable to perform workflow execution update due to Workflow Task in failed state.')),
  ).toBe(false);
  expect(isUpdateDropped(grpcError(13, 'due to unexpected workflow task failure'))).toBe(false);
});

it('sends an update again while a failed workflow task drops it, three times in all, and nothing else again', async () => {
  const dropped = grpcError(9, 'Unable to perform workflow execution update due to unexpected workflow task failure.');
  const sends = (failures: Error[]) => {
    let count = 0;
    const send = async () => {
      const failure = failures[count++];
      if (failure) throw failure;
      return 'answered';
    };
    return { send, count: () => count };
  };
  const once = sends([dropped]);
  await expect(sendAgainIfDropped(once.send)).resolves.toBe('answered');
  expect(once.count()).toBe(2);
  const always = sends([dropped, dropped, dropped, dropped]);
  await expect(sendAgainIfDropped(always.send)).rejects.toBe(dropped);
  expect(always.count()).toBe(3);
  const other = sends([grpcError(9, 'some other precondition')]);
  await expect(sendAgainIfDropped(other.send)).rejects.toThrow('some other precondition');
  expect(other.count()).toBe(1);
});

it('tells a run whose workflow task is failing from other refused preconditions, and says what it waits for', () => {
  const failing = new Error('Workflow Update failed', {
    cause: grpcError(9, 'Unable to perform workflow execution update due to Workflow Task in failed state.'),
  });
  expect(isTaskFailing(failing)).toBe(true);
  expect(isUnreachable(failing)).toBe(false);
  expect(isTaskFailing(grpcError(9, 'some other precondition'))).toBe(false);
  expect(toSubagentError(failing, 'subagent-x:1')).toMatchObject({
    code: 'UNAVAILABLE',
    message: expect.stringContaining('workflow task is failing'),
  });
});

it('reads a page token the server refused for its branch or transition check as stale, and nothing else', () => {
  const stale = grpcError(
    9,
    "Current and request branch tokens, or current and request versioned transitions, don't match.",
  );
  expect(isStalePageToken(new Error('Temporal call failed', { cause: stale }))).toBe(true);
  expect(
    isStalePageToken(grpcError(9, 'Unable to perform workflow execution update due to Workflow Task in failed state.')),
  ).toBe(false);
});

it('reads only an unknown search attribute as one, not a refusal that merely mentions search attributes', () => {
  // The server's words (go.temporal.io/server common/searchattribute/validator.go, common/namespace).
  const undefinedOne = grpcError(3, 'search attribute SubagentStatus is not defined');
  const unmapped = grpcError(3, 'Namespace default has no mapping defined for search attribute SubagentStatus');
  for (const refusal of [undefinedOne, unmapped]) {
    expect(unknownSearchAttribute(new Error('failed to start', { cause: refusal }))).toBe(refusal.message);
  }
  const notRead = grpcError(14, 'unable to get search attributes from cluster metadata: timeout');
  const tooLarge = grpcError(3, 'search attribute SubagentParentRunId value size 2100 exceeds size limit 2048');
  expect(unknownSearchAttribute(notRead)).toBeUndefined();
  expect(unknownSearchAttribute(tooLarge)).toBeUndefined();
});

it('rides out an unreachable server within its window, and nothing else', async () => {
  const down = grpcError(14, 'connection refused');
  let calls = 0;
  const backSoon = () => (++calls < 3 ? Promise.reject(down) : Promise.resolve('read'));
  await expect(ridingOutOutages(backSoon, { windowMs: 60_000 })).resolves.toBe('read');
  expect(calls).toBe(3);

  calls = 0;
  const limited = grpcError(8, 'rate limit exceeded');
  const refusing = () => (++calls, Promise.reject(limited));
  await expect(ridingOutOutages(refusing, { windowMs: 60_000 })).rejects.toBe(limited);
  expect(calls).toBe(1);

  calls = 0;
  const away = () => (++calls, Promise.reject(down));
  await expect(ridingOutOutages(away, { windowMs: 0 })).rejects.toBe(down);
  expect(calls).toBe(1);
  await expect(ridingOutOutages(away, { windowMs: 60_000, isFinal: (err) => err === down })).rejects.toBe(down);
  expect(calls).toBe(2);

  // An abort ends the wait between calls at once, with the failure it was waiting out.
  const stop = new AbortController();
  const waiting = ridingOutOutages(away, { windowMs: 60_000, signal: stop.signal });
  await new Promise((resolve) => setImmediate(resolve));
  stop.abort();
  await expect(waiting).rejects.toBe(down);
  expect(calls).toBe(3);
});

it('forgets an activity a reader saw close, so a follower holds only what is in flight', () => {
  const activities = new OpenActivities();
  activities.scheduled('run-1', 5, { type: 'turn', input: { prompt: 'x' } });
  activities.scheduled('run-2', 5, { type: 'modelCall', input: {} });
  expect(activities.closed('run-1', 5)).toEqual({ type: 'turn', input: { prompt: 'x' } });
  expect(activities.closed('run-1', 5)).toBeUndefined();
  expect(activities.closed('run-2', 5)).toEqual({ type: 'modelCall', input: {} });
  expect(activities.closed('run-2', 6)).toBeUndefined();
});

// Seam §7.1, the service's conformance list, on the durable facade: the registry, the capability
// checks and their order, events with per-listener containment and the deep clone, the error
// family. Each test names its clause (docs/conformance.md maps them).
import { Client, Connection } from '@temporalio/client';
import {
  HarnessError,
  SubagentError,
  type SubagentProviderDescriptor,
  type SubagentRunEndInfo,
  type SubagentRunInfo,
  type SubagentRunSettings,
  TemporalSubagentService,
} from '../../src';
import { createScriptedProvider } from '../../src/testing';
import { newService, recordingLogger, testRuns, text, uniqueName } from '../helpers/temporal';

const scripted = createScriptedProvider({ name: uniqueName('svc') });

const runs = testRuns([scripted]);

const descriptor = (name: string, capabilities: Partial<SubagentProviderDescriptor['capabilities']> = {}) => ({
  name,
  capabilities: { outputSchema: false, depthLimit: false, toolFilter: false, ...capabilities },
  inheritsParentContext: false,
});
const parent = { id: 'parent' };
const request = { prompt: text('hi'), parent };

describe('§7.1 registration', () => {
  it('§7.1 several providers coexist: list keeps insertion order and getProvider returns the registered object', () => {
    const service = newService(runs.temporal);
    const a = descriptor('a');
    const b = descriptor('b');
    service.registerProvider(a);
    service.registerProvider(b);
    expect(service.list()).toEqual(['a', 'b']);
    expect(service.getProvider('a')).toBe(a);
    expect(service.getProvider('missing')).toBeUndefined();
  });

  it('§7.1 registering then starting by name: list and getProvider return the registered object, and the result resolves completed', async () => {
    const service = newService(runs.temporal);
    service.registerProvider(scripted);
    expect(service.list()).toEqual([scripted.name]);
    expect(service.getProvider(scripted.name)).toBe(scripted);
    const run = service.start(scripted.name, request);
    expect(await run.result).toEqual({ output: text('scripted reply to: hi'), stopReason: 'completed' });
    await run.dispose();
  });

  it('§7.1 a duplicate name throws DUPLICATE_PROVIDER and keeps the first', () => {
    const service = newService(runs.temporal);
    const first = descriptor('dup');
    service.registerProvider(first);
    expect(() => service.registerProvider(descriptor('dup'))).toThrow(
      expect.objectContaining({
        code: 'DUPLICATE_PROVIDER',
        message: 'a subagent provider named "dup" is already registered',
      }),
    );
    expect(service.getProvider('dup')).toBe(first);
  });

  it('§7.1 registering emits provider-added, its disposer emits provider-removed, and the name can be registered again', () => {
    const service = newService(runs.temporal);
    const seen: string[] = [];
    service.on('subagent/provider-added', (p) => seen.push(`added ${p.name}`));
    service.on('subagent/provider-removed', (name) => seen.push(`removed ${name}`));
    const dispose = service.registerProvider(descriptor('x'));
    dispose();
    dispose();
    expect(seen).toEqual(['added x', 'removed x']);
    expect(service.list()).toEqual([]);
    service.registerProvider(descriptor('x'));
    expect(service.list()).toEqual(['x']);
  });

  it('§7.1 a throwing provider-added listener propagates and rolls the registration back; registering again works once it is fixed', () => {
    const service = newService(runs.temporal);
    const removed: string[] = [];
    service.on('subagent/provider-removed', (name) => removed.push(name));
    const off = service.on('subagent/provider-added', () => {
      throw new Error('listener bug');
    });
    expect(() => service.registerProvider(descriptor('y'))).toThrow('listener bug');
    expect(service.list()).toEqual([]);
    expect(removed).toEqual(['y']);
    off();
    service.registerProvider(descriptor('y'));
    expect(service.list()).toEqual(['y']);
  });

  it('§7.1 a throwing provider-removed listener: later listeners run, the disposer does not throw, the provider is gone, a warning is logged', () => {
    const logger = recordingLogger();
    const service = newService(runs.temporal, { logger });
    const later: string[] = [];
    service.on('subagent/provider-removed', () => {
      throw new Error('bad listener');
    });
    service.on('subagent/provider-removed', (name) => later.push(name));
    const dispose = service.registerProvider(descriptor('z'));
    expect(() => dispose()).not.toThrow();
    expect(later).toEqual(['z']);
    expect(service.list()).toEqual([]);
    expect(logger.warnings).toEqual([
      expect.stringContaining('subagent/provider-removed listener threw: Error: bad listener'),
    ]);
  });

  it.each<[string, SubagentRunSettings]>([
    ['a negative heartbeat timeout', { heartbeatTimeout: -5 }],
    ['an approval timeout of no time', { approvalTimeout: 0 }],
    ['an approval timeout that is no duration', { approvalTimeout: 'soon' as never }],
    ['a first retry interval longer than the longest (30 s by default)', { retry: { initialInterval: '1 minute' } }],
    [
      'maximumAttempts of 2 ** 31, past the 32-bit count the server takes (it read a negative number and refused every workflow task of the run)',
      { retry: { maximumAttempts: 2 ** 31 } },
    ],
    [
      'maximumAttempts of 2 ** 32 (it reached the server as 0: retry for ever)',
      { retry: { maximumAttempts: 2 ** 32 } },
    ],
    ['nonRetryableErrorTypes that is not a list of names', { retry: { nonRetryableErrorTypes: 5 as never } }],
  ])('rejects run settings that cannot work (%s) with INVALID_CONFIG at registration', (_case, runSettings) => {
    const service = newService(runs.temporal);
    expect(() => service.registerProvider({ ...descriptor('bad'), runSettings })).toThrow(
      expect.objectContaining({ code: 'INVALID_CONFIG' }),
    );
    expect(service.list()).toEqual([]);
  });
});

describe('§7.1 start checks', () => {
  it('§7.1 an unknown name throws NO_PROVIDER, listing the providers that exist', () => {
    const service = newService(runs.temporal);
    service.registerProvider(descriptor('spawn'));
    service.registerProvider(descriptor('fork'));
    expect(() => service.start('acp', request)).toThrow(
      expect.objectContaining({
        code: 'NO_PROVIDER',
        message: 'no subagent provider registered for "acp" (registered: spawn, fork)',
      }),
    );
  });

  it.each([
    ['outputSchema', { outputSchema: { type: 'object' } }],
    ['depthLimit', { maxDepth: 3 }],
    ['toolFilter', { toolFilter: { allow: ['read'] } }],
  ])(
    '§7.1 a request needing %s throws UNSUPPORTED_CAPABILITY from a provider without it, before any run exists',
    (capability, extra) => {
      const service = newService(runs.temporal);
      const starts: SubagentRunInfo[] = [];
      service.on('subagent/start', (info) => starts.push(info));
      service.registerProvider(descriptor('bare'));
      expect(() => service.start('bare', { ...request, ...extra })).toThrow(
        expect.objectContaining({
          code: 'UNSUPPORTED_CAPABILITY',
          message: `subagent provider "bare" does not support the "${capability}" capability`,
        }),
      );
      expect(starts).toEqual([]);
    },
  );

  it('§7.1 a provider with every capability accepts outputSchema together with maxDepth', async () => {
    const service = newService(runs.temporal);
    service.registerProvider(scripted);
    const run = service.start(scripted.name, {
      ...request,
      maxDepth: 2,
      outputSchema: { type: 'object', properties: { ok: { type: 'boolean' } }, required: ['ok'] },
      agentOptions: { script: [{ calls: [{ name: 'structured_output', arguments: { ok: true } }] }] },
    });
    expect(await run.result).toMatchObject({ structured: { ok: true }, stopReason: 'completed' });
    await run.dispose();
  });

  it('§2.2 capabilities are checked in the order outputSchema, depthLimit, toolFilter', () => {
    const service = newService(runs.temporal);
    service.registerProvider(descriptor('none'));
    service.registerProvider(descriptor('schema', { outputSchema: true }));
    service.registerProvider(descriptor('schema-depth', { outputSchema: true, depthLimit: true }));
    const all = { ...request, outputSchema: { type: 'object' }, maxDepth: 3, toolFilter: { deny: ['x'] } };
    const capabilityOf = (name: string) => {
      try {
        service.start(name, all);
      } catch (err) {
        return (err as Error).message.match(/"(\w+)" capability/)?.[1];
      }
    };
    expect([capabilityOf('none'), capabilityOf('schema'), capabilityOf('schema-depth')]).toEqual([
      'outputSchema',
      'depthLimit',
      'toolFilter',
    ]);
  });

  it('§2.2 a capability field set to undefined counts as absent', async () => {
    const service = newService(runs.temporal);
    service.registerProvider({
      ...scripted,
      capabilities: { outputSchema: false, depthLimit: false, toolFilter: false },
    });
    const run = service.start(scripted.name, {
      ...request,
      outputSchema: undefined,
      maxDepth: undefined,
      toolFilter: undefined,
    });
    expect((await run.result).stopReason).toBe('completed');
    await run.dispose();
  });
});

describe('§7.1 events', () => {
  it('§7.1 subagent/start fires synchronously; subagent/end after settlement carries lastAssistantMessage, a clone a listener cannot use to change the output', async () => {
    const service = newService(runs.temporal);
    service.registerProvider(scripted);
    const events: (SubagentRunInfo | SubagentRunEndInfo)[] = [];
    service.on('subagent/start', (info) => events.push(info));
    service.on('subagent/end', (info) => {
      events.push(info);
      (info.lastAssistantMessage![0] as { text: string }).text = 'mutated by a listener';
    });
    const run = service.start(scripted.name, { ...request, agentOptions: { script: [{ reply: 'the answer' }] } });
    expect(events).toEqual([{ provider: scripted.name, id: run.id, segment: 0 }]);
    const result = await run.result;
    await Promise.resolve();
    expect(result.output).toEqual(text('the answer'));
    expect(events).toHaveLength(2);
    expect(events[1]).toEqual({
      provider: scripted.name,
      id: run.id,
      segment: 0,
      stopReason: 'completed',
      lastAssistantMessage: text('mutated by a listener'),
    });
    await run.dispose();
    expect(events).toHaveLength(2);
  });

  it('§7.1 throwing subagent/start and subagent/end listeners: later listeners run, start returns the run, the result resolves', async () => {
    const logger = recordingLogger();
    const service = newService(runs.temporal, { logger });
    service.registerProvider(scripted);
    const later: string[] = [];
    service.on('subagent/start', () => {
      throw new Error('start listener bug');
    });
    service.on('subagent/start', () => later.push('start'));
    service.on('subagent/end', () => {
      throw new Error('end listener bug');
    });
    service.on('subagent/end', (info) => later.push(`end ${info.stopReason}`));
    const run = service.start(scripted.name, request);
    expect((await run.result).stopReason).toBe('completed');
    await Promise.resolve();
    expect(later).toEqual(['start', 'end completed']);
    expect(logger.warnings).toHaveLength(2);
    await run.dispose();
  });

  it('§7.1 when the result rejects (an unreachable server, UNAVAILABLE), subagent/end has stopReason error and no lastAssistantMessage key', async () => {
    // No retry interceptor: a retry still pending once the test closed the connection would throw.
    const connection = Connection.lazy({ address: '127.0.0.1:1', connectTimeout: 300, interceptors: [] });
    const service = new TemporalSubagentService({
      client: new Client({ connection }),
      logger: recordingLogger(),
      startTimeoutMs: 500,
    });
    service.registerProvider(scripted);
    const ends: SubagentRunEndInfo[] = [];
    service.on('subagent/end', (info) => ends.push(info));
    const run = service.start(scripted.name, request);
    const failure = await run.result.then(
      () => undefined,
      (err: unknown) => err,
    );
    expect(failure).toBeInstanceOf(SubagentError);
    expect(failure).toMatchObject({ code: 'UNAVAILABLE' });
    await Promise.resolve();
    expect(ends).toEqual([{ provider: scripted.name, id: run.id, segment: 0, stopReason: 'error' }]);
    expect('lastAssistantMessage' in ends[0]!).toBe(false);
    await run.dispose();
    await connection.close();
  });
});

describe('§7.1 errors', () => {
  it('§7.1 SubagentError is a HarnessError, with its name and the given code', () => {
    const error = new SubagentError('x', 'NO_PROVIDER');
    expect(error).toBeInstanceOf(HarnessError);
    expect(error).toBeInstanceOf(Error);
    expect(error.name).toBe('SubagentError');
    expect(error.code).toBe('NO_PROVIDER');
  });
});

it('§2.2 a start that throws sends nothing: no workflow start goes out, while a valid start sends one', async () => {
  // The real client, its workflow starts recorded on their way to the server.
  const client = new Client({ connection: runs.temporal.connection });
  const sent: string[] = [];
  const start = client.workflow.start.bind(client.workflow);
  client.workflow.start = ((...args: Parameters<typeof start>) => {
    sent.push((args[1] as { workflowId: string }).workflowId);
    return start(...args);
  }) as typeof start;
  const service = new TemporalSubagentService({ client, logger: recordingLogger() });
  service.registerProvider(scripted);
  expect(() => service.start(scripted.name, { ...request, maxDepth: -1 })).toThrow(
    expect.objectContaining({ code: 'INVALID_REQUEST' }),
  );
  // A start goes out a microtask after start() returns: let every pending one run.
  await new Promise((resolve) => setImmediate(resolve));
  expect(sent).toEqual([]);
  const run = service.start(scripted.name, request);
  await new Promise((resolve) => setImmediate(resolve));
  expect(sent).toEqual([run.id]);
  await run.result;
  await run.dispose();
});

// Test files whose LLM children talk to a loopback fake model server: the server, the providers
// made on its endpoint, and `testRuns` hosting them, for the whole file.
import type { SubagentHostedProvider, SubagentRun, SubagentStartRequest } from '../../src';
import { type FakeOpenAI, startFakeOpenAI } from '../../src/testing';
import { type TestRuns, type TestRunsOptions, testRuns } from './temporal';

/** The fake server's endpoint, for a provider's `endpoint` (spread it to add to it). */
export interface FakeModelEndpoint {
  baseURL: string;
  model: string;
}

export interface FakeModelHarness<P extends Record<string, SubagentHostedProvider>> extends TestRuns {
  /** The fake model server; set before the file's first test. */
  readonly fake: FakeOpenAI;
  /** What `makeProviders` made, each hosted by the worker and registered with the service. */
  readonly providers: P;
  /** Starts a run of the provider `makeProviders` made under `key`. */
  start(key: keyof P, request: SubagentStartRequest): SubagentRun;
}

/**
 * For the whole test file: a fake OpenAI-compatible server, the providers `makeProviders` makes
 * on its endpoint, and a connection, worker and service for them (as `testRuns`), set up before
 * the first test and stopped after the last. The replies a test queued and left unused are
 * dropped after it.
 */
export function fakeModelHarness<P extends Record<string, SubagentHostedProvider>>(
  makeProviders: (endpoint: FakeModelEndpoint) => P,
  options: TestRunsOptions = {},
): FakeModelHarness<P> {
  const made = {} as { fake: FakeOpenAI; providers: P };
  beforeAll(async () => {
    made.fake = await startFakeOpenAI();
    made.providers = makeProviders({ baseURL: made.fake.baseURL, model: 'fake-model' });
  });
  // Jest runs hooks in the order they were registered: the providers exist when the worker
  // starts, and the worker has stopped when the server closes.
  const runs = testRuns(() => Object.values(made.providers), options);
  // A failed test's unused replies would answer the next test's model calls.
  afterEach(() => {
    made.fake.discardQueued();
  });
  afterAll(async () => {
    await made.fake?.close();
  });
  return {
    get fake() {
      return made.fake;
    },
    get providers() {
      return made.providers;
    },
    get temporal() {
      return runs.temporal;
    },
    get service() {
      return runs.service;
    },
    start: (key, request) => runs.service.start(made.providers[key]!.name, request),
    status: runs.status,
    closed: runs.closed,
  };
}

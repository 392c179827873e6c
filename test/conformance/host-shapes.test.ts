// Seam §1.11, host shapes: the parent is the harness's own `Agent` object, passed as it is. The
// facade reads the fields it needs (`id`, `options.model`, `options.subagentDepth`,
// `session.header.id`, `session.header.cwd`, `session.events`) from any object: class
// instances, getters and objects with a prototype of their own included.
import type { ResolvedSubagentRequest, SubagentTurnProvider } from '../../src';
import { testRuns, text, uniqueName } from '../helpers/temporal';

const seen: ResolvedSubagentRequest[] = [];
const recorder = (inheritsParentContext: boolean): SubagentTurnProvider => ({
  name: uniqueName(inheritsParentContext ? 'fork-like' : 'spawn-like'),
  capabilities: { outputSchema: false, depthLimit: true, toolFilter: false },
  inheritsParentContext,
  async runTurn(_input, ctx) {
    seen.push(ctx.request);
    return { output: text('recorded'), stopReason: 'completed' };
  },
});
const spawnLike = recorder(false);
const forkLike = recorder(true);
const runs = testRuns([spawnLike, forkLike]);

/** A session event as a harness keeps it: a class instance. */
class SessionEvent {
  constructor(
    readonly seq: number,
    readonly type: string,
    readonly data: unknown,
  ) {}
}

/** A session whose header and log are getters over private state. */
class Session {
  readonly #events: SessionEvent[];
  constructor(
    private readonly id: string,
    private readonly cwd: string,
    events: SessionEvent[] = [],
  ) {
    this.#events = events;
  }
  get header() {
    return { version: 1, id: this.id, createdAt: 0, cwd: this.cwd };
  }
  get events(): readonly SessionEvent[] {
    return this.#events;
  }
}

class AgentOptions {
  constructor(
    readonly model: string,
    readonly subagentDepth: number,
  ) {}
}

/** The harness's agent: fields behind getters, methods the seam never calls. */
class Agent {
  constructor(
    private readonly agentId: string,
    readonly options: AgentOptions,
    readonly session: Session,
  ) {}
  get id() {
    return this.agentId;
  }
  send(): never {
    throw new Error('the seam never drives the parent');
  }
}

async function resolvedParentOf(provider: SubagentTurnProvider, parent: unknown): Promise<ResolvedSubagentRequest> {
  const run = runs.service.start(provider.name, { prompt: text('go'), parent: parent as Agent });
  expect(await run.result).toEqual({ output: text('recorded'), stopReason: 'completed' });
  await run.dispose();
  return seen.at(-1)!;
}

describe('§1.11 host shapes', () => {
  it('§1.11 reads a class-instance Agent field by field: id, options.model, options.subagentDepth, session.header.id and cwd', async () => {
    const agent = new Agent('agent-7', new AgentOptions('parent-model', 2), new Session('session-7', '/work/repo'));
    const request = await resolvedParentOf(spawnLike, agent);
    expect(request.parent).toEqual({
      agentId: 'agent-7',
      sessionId: 'session-7',
      cwd: '/work/repo',
      depth: 2,
      model: 'parent-model',
    });
    expect(request.depth).toBe(3);
  });

  it('§1.11 reads a plain parent whose session is a class instance', async () => {
    const request = await resolvedParentOf(spawnLike, { id: 'plain-parent', session: new Session('s-1', '/tmp') });
    expect(request.parent).toEqual({ agentId: 'plain-parent', sessionId: 's-1', cwd: '/tmp', depth: 0 });
  });

  it('§1.11 and §5.3 seed a fork from session.events held as class instances', async () => {
    const events = [
      new SessionEvent(0, 'user/message', { content: text('first question') }),
      new SessionEvent(1, 'assistant/message', { turn: 0, step: 0, content: text('first answer') }),
      new SessionEvent(2, 'turn/end', { turn: 0, reason: { kind: 'completed' } }),
      new SessionEvent(3, 'user/message', { content: text('the turn in flight') }),
    ];
    const agent = new Agent('agent-8', new AgentOptions('m', 0), new Session('session-8', '/work', events));
    const request = await resolvedParentOf(forkLike, agent);
    expect(request.seed).toEqual({
      events: 3,
      entries: [
        { kind: 'user', content: text('first question') },
        { kind: 'assistant', id: 'seed-1', content: text('first answer'), stopReason: 'completed' },
      ],
    });
  });

  it('§1.11 still refuses a parent without an id, with INVALID_REQUEST', () => {
    expect(() =>
      runs.service.start(spawnLike.name, {
        prompt: text('x'),
        parent: new Agent('', new AgentOptions('m', 0), new Session('s', '/')),
      }),
    ).toThrow(
      expect.objectContaining({
        code: 'INVALID_REQUEST',
        message: 'request.parent is required: the delegating agent, at least { id: string }',
      }),
    );
  });
});

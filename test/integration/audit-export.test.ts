// The audit export of a long history, a record at a time: `streamAudit` yields what `exportAudit`
// returns, each record sealed as the history is read; `subagents audit export` writes it out as it
// comes and whole through a pipe, and `audit verify` reads a file bigger than its heap line by line.
// The CLI's output of it into a real pipe: held at the pace a slow reader reads, and stopped
// quietly when the reader closes the pipe early.
import { execFile, execFileSync, spawn } from 'node:child_process';
import {
  chmodSync,
  closeSync,
  constants,
  createWriteStream,
  lstatSync,
  mkdtempSync,
  openSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  symlinkSync,
} from 'node:fs';
import { Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { setTimeout as sleep } from 'node:timers/promises';
import { pathToFileURL } from 'node:url';
import { promisify } from 'node:util';
import { Client } from '@temporalio/client';
import type { Payload, PayloadCodec } from '@temporalio/common';
import {
  type AuditRecord,
  type AuditSigner,
  ed25519AuditSigner,
  exportAudit,
  generateAuditKeyPair,
  sealAuditRecords,
  streamAudit,
  verifyAudit,
} from '../../src/audit';
import type { SubagentRunEvent } from '../../src';
import { createScriptedProvider } from '../../src/testing';
import { PARENT_RUN_ATTRIBUTE, PROVIDER_ATTRIBUTE, STATUS_ATTRIBUTE } from '../../workflows/search-attributes';
import { eventually, fixture, testRuns, text, uniqueName } from '../helpers/temporal';

const scripted = createScriptedProvider({ name: uniqueName('audit-export') });
const runs = testRuns([scripted]);

const CLI = resolve(__dirname, '..', '..', 'src', 'cli', 'index.ts');
/** Each CLI invocation compiles the CLI as it loads: seconds on a busy machine. */
jest.setTimeout(120_000);

/** The CLI as a process against the shared server, with `node` options of its own; rejects with its exit. */
const cli = (args: string[], nodeOptions: string[] = []) =>
  promisify(execFile)(process.execPath, [...nodeOptions, '--import', 'tsx', CLI, ...args], {
    env: { ...process.env, TEMPORAL_ADDRESS: runs.temporal.address, TEMPORAL_NAMESPACE: runs.temporal.namespace },
    maxBuffer: 16 * 1024 * 1024,
  });

/** 3,000 characters of a streaming model call's text, as its worker signals them in a batch. */
const DELTA = 'streamed text '.repeat(215);
/**
 * A run that settled its first segment, was sent 120 text deltas (as a streaming model call's
 * worker sends them), and was disposed: over 120 records, past a signature checkpoint, and an
 * export of about 400 KB.
 */
let longRun: string;
beforeAll(async () => {
  const run = runs.service.start(scripted.name, { prompt: text('a long history'), parent: { id: 'parent' } });
  await run.result;
  const handle = runs.temporal.client.workflow.getHandle(run.id);
  for (let i = 0; i < 120; i++) await handle.signal('textDelta', { turn: 0, attempt: 1, text: `${i} ${DELTA}` });
  await run.dispose();
  longRun = run.id;
});

/** A record without what the time it was sealed at decides: its hash, its link, a header's or signature's time. */
const sealedAt = ({ hash: _, prev: __, ...record }: AuditRecord) => {
  if (record.type === 'audit.header') return { ...record, time: '' };
  if (record.type !== 'audit.signature') return record;
  const { covers, final, keyId } = record.data as { covers: { seq: number }; final: boolean; keyId: string };
  return { ...record, time: '', data: { covers: covers.seq, final, keyId } };
};

const collect = async (records: AsyncIterable<AuditRecord>) => {
  const all: AuditRecord[] = [];
  for await (const record of records) all.push(record);
  return all;
};

describe('streamAudit', () => {
  const keys = generateAuditKeyPair();
  it.each<[string, AuditSigner | undefined]>([
    ['unsigned', undefined],
    ['signed', ed25519AuditSigner(keys.privateKey, 'ops')],
  ])(
    'yields the records exportAudit returns, past a signature checkpoint, and they verify (%s)',
    async (_case, signer) => {
      const streamed = await collect(streamAudit(runs.temporal.client, longRun, signer));
      const exported = await exportAudit(runs.temporal.client, longRun, signer);
      expect(streamed.length).toBeGreaterThan(120);
      expect(streamed.map(sealedAt)).toEqual(exported.map(sealedAt));
      expect(streamed.filter((record) => record.type === 'text.delta')).toHaveLength(120);
      const options = signer ? { publicKey: keys.publicKey } : {};
      expect(verifyAudit(streamed, options)).toEqual({ ok: true, records: streamed.length, signed: !!signer });
      if (signer) {
        const signatures = streamed.filter((record) => record.type === 'audit.signature');
        expect(signatures.map((record) => (record.data as { covers: { seq: number } }).covers.seq)).toEqual([
          100,
          streamed.length - 2,
        ]);
      }
    },
  );

  it('yields each record as the history is read, not once all of it has been', async () => {
    // A client whose codec counts the payloads it decodes: the records' reading of the history.
    let decoded = 0;
    const counting: PayloadCodec = {
      encode: async (payloads: Payload[]) => payloads,
      decode: async (payloads: Payload[]) => {
        decoded += payloads.length;
        return payloads;
      },
    };
    const client = new Client({
      connection: runs.temporal.connection as never,
      namespace: runs.temporal.namespace,
      dataConverter: { payloadCodecs: [counting] },
    });
    const decodedAt: number[] = [];
    for await (const _ of streamAudit(client, longRun)) decodedAt.push(decoded);
    // All read and held before the first record (the header, which counts them) would give each
    // record the same count; here the last one came after 120 more deltas were decoded.
    expect(decodedAt.at(-1)! - decodedAt[1]!).toBeGreaterThanOrEqual(120);
  });
});

describe('the audit of many messages', () => {
  it('records and tells a message sent again after the run forgot its id (1,000 others later), as the run took it: again (the audit and events() remembered every id, and left it out)', async () => {
    const run = runs.service.start(scripted.name, { prompt: text('many messages'), parent: { id: 'parent' } });
    await run.result;
    const handle = runs.temporal.client.workflow.getHandle(run.id);
    const send = (i: number) => handle.signal('sendMessage', { content: text(`message ${i}`), id: `m${i}` });
    await send(0);
    for (let batch = 0; batch < 40; batch++) {
      await Promise.all(Array.from({ length: 25 }, (_, i) => send(1 + batch * 25 + i)));
    }
    await send(0);
    // The workflow took the last one as a message: it keeps the last 1,000 ids, and m0 was older.
    await eventually(async () => ((await runs.status(run.id)).pendingMessages === 1002 ? true : undefined), 60_000);
    const messages = (await exportAudit(runs.temporal.client, run.id)).filter((record) => record.type === 'message');
    expect(messages.length).toBe(1002);
    expect(messages.at(-1)!.data).toMatchObject({ content: text('message 0') });
    // And so do its progress events.
    const told: SubagentRunEvent[] = [];
    for await (const event of run.events!({ follow: false })) if (event.type === 'message') told.push(event);
    expect(told.length).toBe(1002);
    expect(told.at(-1)).toMatchObject({ content: text('message 0') });
    await run.dispose();
  });
});

describe('the audit of a deeply nested signal', () => {
  it('exports and verifies a run a raw client signalled data nested 3,000 objects deep (the export threw a RangeError, for ever)', async () => {
    const run = runs.service.start(scripted.name, { prompt: text('deep'), parent: { id: 'parent' } });
    await run.result;
    let deep: unknown = 'bottom';
    for (let i = 0; i < 3000; i++) deep = { level: deep };
    await runs.temporal.client.workflow.getHandle(run.id).signal('textDelta', { turn: 0, attempt: 1, text: deep });
    await run.dispose();
    const streamed = await collect(streamAudit(runs.temporal.client, run.id));
    // (Compared as text: jest's own matchers recurse, and run out of stack this deep.)
    const delta = streamed.find((record) => record.type === 'text.delta')!.data as { text: unknown };
    expect(JSON.stringify(delta.text) === JSON.stringify(deep)).toBe(true);
    expect(verifyAudit(streamed)).toMatchObject({ ok: true });
  });
});

describe('subagents audit export and verify', () => {
  /** Directories of this block's files (one of 40 MB), removed after it. */
  const dirs: string[] = [];
  const scratch = (prefix: string) => {
    dirs.push(mkdtempSync(join(tmpdir(), prefix)));
    return dirs.at(-1)!;
  };
  afterAll(() => {
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
  });

  it('prints a long export and its logs whole through a pipe (all but the first 64 KB were lost when the CLI exited)', async () => {
    const { stdout } = await cli(['audit', 'export', longRun]);
    const records = stdout
      .trimEnd()
      .split('\n')
      .map((line) => JSON.parse(line) as AuditRecord);
    expect(stdout.length).toBeGreaterThan(300_000);
    expect(verifyAudit(records)).toEqual({ ok: true, records: records.length, signed: false });
    expect(records.filter((record) => record.type === 'text.delta')).toHaveLength(120);

    const logs = await cli(['logs', longRun, '--no-follow', '--json']);
    const types = logs.stdout
      .trimEnd()
      .split('\n')
      .map((line) => (JSON.parse(line) as AuditRecord).type);
    expect(types).toEqual(records.slice(1).map((record) => record.type));
  });

  it('writes --out through a partial file renamed over it (an existing file keeps its mode, a symbolic link its place), and verify reads it back; a directory that does not exist is refused', async () => {
    const dir = scratch('subagent-audit-export-');
    const file = join(dir, 'audit.jsonl');
    const exported = await cli(['audit', 'export', longRun, '--out', file, '--json']);
    const lines = readFileSync(file, 'utf8').trimEnd().split('\n');
    expect(JSON.parse(exported.stdout)).toEqual({ id: longRun, records: lines.length, file });
    expect(readdirSync(dir)).toEqual(['audit.jsonl']);
    // Exported again over a file only its owner may read, through a symbolic link to it.
    chmodSync(file, 0o600);
    const link = join(dir, 'latest.jsonl');
    symlinkSync(file, link);
    await cli(['audit', 'export', longRun, '--out', link]);
    expect(lstatSync(link).isSymbolicLink()).toBe(true);
    expect(statSync(file).mode & 0o777).toBe(0o600);
    expect(readFileSync(file, 'utf8').trimEnd().split('\n')).toHaveLength(lines.length);
    expect(readdirSync(dir).sort()).toEqual(['audit.jsonl', 'latest.jsonl']);

    const nowhere = join(dir, 'missing', 'audit.jsonl');
    await expect(cli(['audit', 'export', longRun, '--out', nowhere])).rejects.toMatchObject({
      code: 6,
      stderr: `cannot write ${nowhere}: ENOENT\n`,
    });
    const verified = await cli(['audit', 'verify', file, '--against-server']);
    expect(verified.stdout).toContain(
      `${lines.length} records, chain intact, every record as the server's history has it`,
    );
  });

  it('verifies a file twice the size of its heap, line by line (it read the file into one string: out of memory)', async () => {
    // 2,000 records of 20 KB: 40 MB, for a CLI whose heap may not pass 48 MB.
    const file = join(scratch('subagent-audit-big-'), 'big.jsonl');
    const drafts = async function* () {
      for (let i = 0; i < 2000; i++) yield { type: 'message', time: `t${i}`, data: { i, content: 'x'.repeat(20_000) } };
    };
    const lines = async function* () {
      for await (const record of sealAuditRecords('subagent-x:big', 2000, drafts())) {
        yield JSON.stringify(record) + '\n';
      }
    };
    await pipeline(Readable.from(lines()), createWriteStream(file));
    const { stdout } = await cli(['audit', 'verify', file], ['--max-old-space-size=48']);
    expect(stdout).toContain('2001 records, chain intact');
  });

  it('names the first 20 records that differ from the server and counts the rest, against the server (it held and printed every one)', async () => {
    // An intact chain of 300 records the run's history never had: each one differs.
    const file = join(scratch('subagent-audit-differs-'), 'differs.jsonl');
    const drafts = function* () {
      for (let i = 0; i < 300; i++) yield { type: 'message', time: `t${i}`, data: { i } };
    };
    const lines = async function* () {
      for await (const record of sealAuditRecords(longRun, 300, drafts())) yield JSON.stringify(record) + '\n';
    };
    await pipeline(Readable.from(lines()), createWriteStream(file));
    /** The CLI's exit and output: it exits 5, which `cli` rejects with. */
    const verify = (...args: string[]) =>
      cli(['audit', 'verify', file, '--against-server', ...args]).then(
        ({ stdout }) => ({ code: 0, stdout }),
        (err: { code: number; stdout: string }) => ({ code: err.code, stdout: err.stdout }),
      );
    const human = await verify();
    expect(human.code).toBe(5);
    const named = human.stdout.trimEnd().split('\n').slice(1);
    expect(named).toHaveLength(21);
    expect(named[0]).toMatch(/^ {2}record 1: the file has message at t0, the server start at /);
    const json = await verify('--json');
    expect(json.code).toBe(5);
    const verdict = JSON.parse(json.stdout) as { ok: boolean; differences: string[]; differenceCount: number };
    expect(verdict).toMatchObject({ ok: false, differences: named.slice(0, 20).map((line) => line.trim()) });
    // Every one of the file's 300 records differs, and so does every record of the server's past them.
    expect(verdict.differenceCount).toBeGreaterThanOrEqual(300);
    expect(named[20]).toBe(`  and ${verdict.differenceCount - 20} more`);
  });
});

describe("the CLI's output through a pipe whose reader is slow, or gone", () => {
  const dirs: string[] = [];
  /** CLI processes still to stop after the test (a failed one may be left running). */
  const children: ReturnType<typeof spawn>[] = [];
  afterEach(() => {
    for (const child of children) {
      if (child.exitCode !== null || child.signalCode !== null) continue;
      try {
        // A shell's pipeline, the CLI in it, as a group.
        process.kill(-child.pid!, 'SIGKILL');
      } catch {
        child.kill('SIGKILL');
      }
    }
    children.length = 0;
  });
  afterAll(() => {
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
  });

  /**
   * A real pipe (a FIFO, as a shell's `|` makes): the fd to hand a process as its output, and the
   * test's end, which reads nothing until the test asks it to (as `less` reads only a screenful).
   */
  const pipe = () => {
    dirs.push(mkdtempSync(join(tmpdir(), 'subagent-cli-pipe-')));
    const path = join(dirs.at(-1)!, 'fifo');
    execFileSync('mkfifo', [path]);
    const readEnd = new Socket({ fd: openSync(path, constants.O_RDONLY | constants.O_NONBLOCK), writable: false });
    return { path, writeFd: openSync(path, constants.O_WRONLY), readEnd };
  };
  /** Everything a pipe's reader reads from now until the writer closes it. */
  const readAll = (readEnd: Socket) =>
    new Promise<string>((done) => {
      let all = '';
      readEnd.setEncoding('utf8').on('data', (chunk: string) => (all += chunk));
      readEnd.resume();
      readEnd.once('end', () => done(all));
    });
  type Stdio = Record<'stdout' | 'stderr', { buffered: number; highWaterMark: number; waitingForDrain: boolean }>;

  /**
   * The CLI as a process writing its stdout and stderr into pipes the test reads when it chooses,
   * with test/fixtures/stdio-probe.ts loaded to say what the process holds unwritten.
   */
  function cliThroughPipes(args: string[]) {
    const [stdout, stderr] = [pipe(), pipe()];
    const child = spawn(
      process.execPath,
      ['--import', 'tsx', '--import', pathToFileURL(fixture('stdio-probe')).href, CLI, ...args],
      {
        env: { ...process.env, TEMPORAL_ADDRESS: runs.temporal.address, TEMPORAL_NAMESPACE: runs.temporal.namespace },
        stdio: ['ignore', stdout.writeFd, stderr.writeFd, 'ipc'],
      },
    );
    children.push(child);
    closeSync(stdout.writeFd);
    closeSync(stderr.writeFd);
    const exited = new Promise<number | null>((done) => child.once('exit', (code) => done(code)));
    // A question sent before the probe listens would be lost.
    const ready = new Promise<void>((done) => child.once('message', () => done()));
    /** What its stdout and stderr hold unwritten now; rejects once it has exited. */
    const stdio = async () => {
      await ready;
      return new Promise<Stdio>((answer, reject) => {
        if (child.exitCode !== null) return reject(new Error(`the CLI exited ${child.exitCode}`));
        const exitedFirst = (code: number | null) => reject(new Error(`the CLI exited ${code}`));
        child.once('exit', exitedFirst);
        child.once('message', (message) => {
          child.off('exit', exitedFirst);
          answer(message as Stdio);
        });
        child.send('stdio?');
      });
    };
    return {
      stdout: stdout.readEnd,
      stderr: stderr.readEnd,
      exited,
      stdio,
      /**
       * Waits until `stream` waits for its pipe to take more, or has shown that it does not (by
       * buffering past `HOLDS_IT_ALL`), and checks that it waits, holding no more than a buffer's
       * worth and `slack`.
       */
      holdsAtPipe: async (stream: keyof Stdio, slack = LONGEST_LINE) => {
        const held = await eventually(async () => {
          const now = (await stdio())[stream];
          return now.waitingForDrain || now.buffered > HOLDS_IT_ALL ? now : undefined;
        }, 60_000);
        expect(held.buffered).toBeLessThan(held.highWaterMark + slack);
        expect(held.waitingForDrain).toBe(true);
      },
    };
  }

  /** Far less than the history still to write: the pipe's 64 KB and its reader's 16 KB are the rest. */
  const HOLDS_IT_ALL = 100_000;
  /** A line of the long history, at most: a text delta of 3,000 characters, as JSON. */
  const LONGEST_LINE = 4096;

  it.each<[string, (id: string) => string[], (output: string) => void]>([
    [
      'logs --no-follow --json',
      (id) => ['logs', id, '--no-follow', '--json'],
      (output) =>
        expect(
          output
            .trimEnd()
            .split('\n')
            .filter((line) => JSON.parse(line).type === 'text.delta'),
        ).toHaveLength(120),
    ],
    [
      'logs --no-follow',
      (id) => ['logs', id, '--no-follow'],
      (output) => expect(output.split('\n').filter((line) => line.includes('… '))).toHaveLength(120),
    ],
    [
      'audit export',
      (id) => ['audit', 'export', id],
      (output) => {
        const records = output
          .trimEnd()
          .split('\n')
          .map((line) => JSON.parse(line) as AuditRecord);
        expect(verifyAudit(records)).toMatchObject({ ok: true });
      },
    ],
  ])(
    'holds no more than its stdout takes while the reader of its pipe reads nothing, then writes the rest whole: %s (logs buffered the whole history)',
    async (_command, args, whole) => {
      const cli = cliThroughPipes(args(longRun));
      const stderr = readAll(cli.stderr);
      await cli.holdsAtPipe('stdout');
      const output = readAll(cli.stdout);
      expect(await cli.exited).toBe(0);
      whole(await output);
      expect(await stderr).toBe('');
    },
  );

  it("holds no more than its stderr takes while start --wait's progress is not read, and prints each record once (the progress buffered the whole history)", async () => {
    const run = runs.service.start(scripted.name, { prompt: text('progress'), parent: { id: 'parent' } });
    await run.result;
    const handle = runs.temporal.client.workflow.getHandle(run.id);
    for (let i = 0; i < 120; i++) await handle.signal('textDelta', { turn: 0, attempt: 1, text: `${i} ${DELTA}` });
    const cli = cliThroughPipes(['resume', run.id, 'go on', '--wait']);
    const stdout = readAll(cli.stdout);
    await cli.holdsAtPipe('stderr');
    const progress = await readAll(cli.stderr);
    expect(await cli.exited).toBe(0);
    expect(await stdout).toBe('completed: scripted reply to: go on\n');
    const deltas = progress.split('\n').filter((line) => line.includes('… '));
    expect(deltas.map((line) => Number(/… (\d+) /.exec(line)![1]))).toEqual(Array.from({ length: 120 }, (_, i) => i));
    expect(progress).toMatch(/turn 1 completed/);
    await run.dispose();
  });

  it('holds no more than its stdout takes while the reader of its pipe reads nothing, then writes the rest as one JSON array: show --tree --json (it held every run of the tree until the walk ended)', async () => {
    // A parked run with five runs below it (made its children by a raw client's childStarted
    // signals), each with an answer of 60,000 characters: a tree of 300 KB.
    const answer = 'a'.repeat(60_000);
    const park = async (reply: string) => {
      const run = runs.service.start(scripted.name, {
        prompt: text('tree'),
        parent: { id: 'parent' },
        agentOptions: { script: [{ reply }] },
      });
      await run.result;
      return run;
    };
    const root = await park('root');
    const children = await Promise.all(Array.from({ length: 5 }, () => park(answer)));
    try {
      for (const child of children) {
        await runs.temporal.client.workflow.getHandle(root.id).signal('childStarted', { runId: child.id });
      }
      await eventually(async () => ((await runs.status(root.id)).children.length === 5 ? true : undefined));
      const cli = cliThroughPipes(['show', root.id, '--tree', '--json']);
      const stderr = readAll(cli.stderr);
      // A buffer's worth, and the run being printed: one child of 60 KB.
      await cli.holdsAtPipe('stdout', answer.length + LONGEST_LINE);
      const output = readAll(cli.stdout);
      expect(await cli.exited).toBe(0);
      const nodes = JSON.parse(await output) as { id: string; treeDepth: number; lastResult: { output: unknown } }[];
      expect(nodes.map(({ id, treeDepth }) => [id, treeDepth])).toEqual([
        [root.id, 0],
        ...children.map((child) => [child.id, 1]),
      ]);
      expect(nodes[1]!.lastResult.output).toEqual(text(answer));
      expect(await stderr).toBe('');
    } finally {
      await Promise.all([root, ...children].map((run) => run.dispose()));
    }
  });

  it('holds no more than its stdout takes while the reader of its pipe reads nothing, then writes the rest as one JSON array: list --json (it held every row until the listing ended)', async () => {
    // 200 runs of a provider of their own, each row some 1,200 characters (a long parent run id):
    // a listing of 240 KB. Started by a raw client on a queue no worker polls: they stay running.
    const provider = uniqueName('listed');
    const taskQueue = uniqueName('nobody-polls');
    const ids = Array.from({ length: 200 }, (_, i) => `subagent-${provider}:${i}`);
    const { client } = runs.temporal;
    for (const id of ids) {
      await client.workflow.start('subagentRunWorkflow', {
        workflowId: id,
        taskQueue,
        args: [{}],
        typedSearchAttributes: [
          { key: PROVIDER_ATTRIBUTE, value: provider },
          { key: PARENT_RUN_ATTRIBUTE, value: `subagent-parent:${'p'.repeat(1000)}` },
          { key: STATUS_ATTRIBUTE, value: 'running' },
        ],
      });
    }
    try {
      await eventually(async () => {
        let listed = 0;
        for await (const _ of client.workflow.list({ query: `SubagentProvider = '${provider}'` })) listed++;
        return listed === ids.length ? true : undefined;
      }, 30_000);
      const cli = cliThroughPipes(['list', '--provider', provider, '--limit', '1000', '--json']);
      const stderr = readAll(cli.stderr);
      await cli.holdsAtPipe('stdout');
      const output = readAll(cli.stdout);
      expect(await cli.exited).toBe(0);
      const rows = JSON.parse(await output) as { id: string; provider: string; status: string }[];
      expect(rows.map((row) => row.id).sort()).toEqual([...ids].sort());
      expect(rows[0]).toMatchObject({ provider, status: 'running' });
      expect(await stderr).toBe('');
    } finally {
      await Promise.all(ids.map((id) => client.workflow.getHandle(id).terminate('listed')));
    }
  });

  /** Reads up to its first line, then closes its end, as `head -1` does. */
  const closeAfterFirstLine = (readEnd: Socket) =>
    new Promise<string>((done) => {
      let read = '';
      readEnd.setEncoding('utf8').on('data', (chunk: string) => {
        read += chunk;
        if (!read.includes('\n')) return;
        readEnd.destroy();
        done(read.slice(0, read.indexOf('\n')));
      });
      readEnd.resume();
    });

  it.each<[string, (id: string) => string[]]>([
    ['audit export', (id) => ['audit', 'export', id]],
    ['logs --no-follow', (id) => ['logs', id, '--no-follow']],
    ['logs --json', (id) => ['logs', id, '--json']],
  ])(
    'stops quietly, exit 0, when the reader of its pipe closes it after the first line: %s (audit export said "write EPIPE", exit 6; logs threw it, exit 1)',
    async (_command, args) => {
      const cli = cliThroughPipes(args(longRun));
      const stderr = readAll(cli.stderr);
      expect(await closeAfterFirstLine(cli.stdout)).toMatch(/^\S/);
      expect(await cli.exited).toBe(0);
      expect(await stderr).toBe('');
    },
  );

  it('stops quietly, exit 0, when the reader of the FIFO it exports to with --out closes it after the first line (it said "write EPIPE", exit 6)', async () => {
    const fifo = pipe();
    try {
      const cli = cliThroughPipes(['audit', 'export', longRun, '--out', fifo.path]);
      const [stdout, stderr] = [readAll(cli.stdout), readAll(cli.stderr)];
      expect(JSON.parse(await closeAfterFirstLine(fifo.readEnd))).toMatchObject({ type: 'audit.header' });
      expect(await cli.exited).toBe(0);
      expect({ stdout: await stdout, stderr: await stderr }).toEqual({ stdout: '', stderr: '' });
    } finally {
      // Held open so that the FIFO's reader saw no end before the CLI opened it.
      closeSync(fifo.writeFd);
    }
  });

  it.each<[string, (id: string) => string[]]>([
    ['list', () => ['list']],
    ['list --json', () => ['list', '--json']],
    ['show', (id) => ['show', id]],
    ['show --json', (id) => ['show', id, '--json']],
  ])(
    'exits quietly when the reader of its pipe has gone before it writes: %s (it threw "write EPIPE", exit 1)',
    async (_command, args) => {
      const cli = cliThroughPipes(args(longRun));
      cli.stdout.destroy();
      const stderr = readAll(cli.stderr);
      expect(await cli.exited).toBe(0);
      expect(await stderr).toBe('');
    },
  );

  it('stops following a run at its next record once the reader of its pipe has gone: logs --follow (it threw "write EPIPE", exit 1)', async () => {
    const run = runs.service.start(scripted.name, { prompt: text('followed'), parent: { id: 'parent' } });
    await run.result;
    // A shell's `| head -1`: an anonymous pipe, whose reader's going Node sees only at a write.
    const shell = spawn(
      'bash',
      [
        '-c',
        'set -o pipefail; "$@" | head -1',
        '-',
        process.execPath,
        '--import',
        'tsx',
        CLI,
        'logs',
        run.id,
        '--follow',
      ],
      {
        env: { ...process.env, TEMPORAL_ADDRESS: runs.temporal.address, TEMPORAL_NAMESPACE: runs.temporal.namespace },
        stdio: ['ignore', 'pipe', 'pipe'],
        // A group of its own, which the test stops whole if the CLI is left following.
        detached: true,
      },
    );
    children.push(shell);
    const exited = new Promise<number | null>((done) => shell.once('exit', (code) => done(code)));
    const [stdout, stderr] = [readAll(shell.stdout as Socket), readAll(shell.stderr as Socket)];
    await new Promise<void>((read) => shell.stdout!.once('data', () => read()));
    // The history so far fitted in the pipe, and head has gone: the CLI is following the run, and
    // learns its reader has gone when it writes the next record.
    await runs.temporal.client.workflow
      .getHandle(run.id)
      .signal('sendMessage', { content: text('anyone there?'), id: 'm1' });
    expect(await exited).toBe(0);
    expect(await stdout).toContain('started on');
    expect(await stderr).toBe('');
    expect((await runs.temporal.client.workflow.getHandle(run.id).describe()).status.name).toBe('RUNNING');
    await run.dispose();
  });

  it('stops following a quiet run as soon as the reader of its FIFO has gone, with no record written: logs --follow (it held its long poll on the server until the run wrote again, for days maybe)', async () => {
    const run = runs.service.start(scripted.name, { prompt: text('parked'), parent: { id: 'parent' } });
    // Parked: the run writes nothing more until it is told something.
    await run.result;
    const cli = cliThroughPipes(['logs', run.id, '--follow']);
    const stderr = readAll(cli.stderr);
    expect(await closeAfterFirstLine(cli.stdout)).toContain('started on');
    // Its reader's going is all there is for the CLI to notice (it is asked every 200 ms).
    expect(await Promise.race([cli.exited, sleep(20_000, 'still following', { ref: false })])).toBe(0);
    expect(await stderr).toBe('');
    expect((await runs.temporal.client.workflow.getHandle(run.id).describe()).status.name).toBe('RUNNING');
    await run.dispose();
  });

  it('stops waiting for a run as soon as the reader of the FIFO its result goes to has gone, the run going on: start --wait (it waited for the run to settle, days maybe)', async () => {
    // A provider no worker hosts: the run waits for one, and settles never.
    const cli = cliThroughPipes(['start', uniqueName('nobody-hosts'), 'hello', '--wait']);
    let stderr = '';
    const id = await new Promise<string>((started) => {
      cli.stderr.setEncoding('utf8').on('data', (chunk: string) => {
        stderr += chunk;
        const line = /^started (\S+)$/m.exec(stderr);
        if (line) started(line[1]!);
      });
      cli.stderr.resume();
    });
    try {
      cli.stdout.destroy();
      expect(await Promise.race([cli.exited, sleep(20_000, 'still waiting', { ref: false })])).toBe(0);
      // Its progress, and no word of the reader gone.
      expect(stderr.split('\n').filter((line) => line && !/^(started | {2})/.test(line))).toEqual([]);
      expect((await runs.temporal.client.workflow.getHandle(id).describe()).status.name).toBe('RUNNING');
    } finally {
      await runs.temporal.client.workflow.getHandle(id).terminate('done with it');
    }
  });
});

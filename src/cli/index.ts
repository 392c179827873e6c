#!/usr/bin/env node
// `subagents`: operate durable subagent runs from a terminal. `dev` runs the embedded server and a
// worker; the other commands talk to the configured server (TEMPORAL_ADDRESS or a Temporal CLI
// profile; default 127.0.0.1:7233, where `dev` listens) and never load the Temporal worker.
// Human output by default, `--json` for scripts; exit codes in USAGE below.
import { type ParseArgsConfig, parseArgs } from 'node:util';
import { sealedWithoutCodec } from '../temporal/errors';
import { SubagentError } from '../seam/errors';
import { ensureSearchAttributes } from '../temporal/search-attributes';
import { auditExport, auditKeygen, auditVerify } from './audit';
import { CliError, EXIT, Flags, need, out, withClient } from './common';
import { ReaderGone, watchOutput } from './output';
import { answerApproval, cancel, list, logs, resume, send, show, start } from './runs';

const USAGE = `usage: subagents <command> [options]

  dev [--port N] [--ui-port N]            embedded Temporal server (.data/temporal.db) and a worker
                                          hosting SUBAGENT_PROVIDERS (default scripted,spawn,fork)
  worker                                  a worker for SUBAGENT_PROVIDERS against TEMPORAL_ADDRESS
  setup                                   register the runs' search attributes on the namespace
  start <provider> <prompt> [--schema FILE] [--cwd DIR] [--max-depth N] [--agent-options JSON] [--wait]
                                          (--cwd: the child's working directory; without it, no file tools)
  list [--provider P] [--status running|awaiting-approval|parked|closed] [--limit N]
  show <id> [--tree]                      (--tree: every run below it too, with what each spent)
  send <id> <message>
  cancel <id>
  resume <id> <message> [--wait]
  approve <id> <request> [--reason TEXT]  lets a tool call held for approval run (in the run or a run
                                          below it; the request id is in logs, show and events)
  deny <id> <request> [--reason TEXT]     denies it; the child reads the reason
  logs <id> [--follow|--no-follow]        the run's records as they happen, approvals waiting included:
                                          until it closes (--follow, the default), or what it has so far
  audit export <id> [--out FILE]          the run's whole history as hash-chained JSONL, signed with
                                          SUBAGENT_AUDIT_SIGNING_KEY when it is set
  audit verify <file> [--public-key FILE] [--against-server]
                                          checks the chain, the signatures, and each record against the
                                          server's history; exits 5 if anything differs
  audit keygen --out PREFIX               a new Ed25519 signing key pair: PREFIX.key, PREFIX.pub

options: --json (machine-readable output), --help
environment: TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE, TEMPORAL_API_KEY, TEMPORAL_TLS*, TEMPORAL_PROFILE and
             TEMPORAL_CONFIG_FILE (as the Temporal CLI reads them), SUBAGENT_ENCRYPTION_KEYS,
             SUBAGENT_PAYLOAD_STORE, SUBAGENT_AUDIT_SIGNING_KEY
exit codes: 0 done; 1 the run ended without completing (approve, deny: decided already otherwise);
            2 usage error; 3 unknown run or approval request;
            4 Temporal server unreachable; 5 audit verification failed; 6 any other error`;

/** `parseArgs`, its refusals (an unknown option, a missing value) as usage errors, exit 2. */
function parseFlags<T extends ParseArgsConfig>(config: T): ReturnType<typeof parseArgs<T>> {
  try {
    return parseArgs(config);
  } catch (err) {
    if (!String((err as { code?: unknown }).code).startsWith('ERR_PARSE_ARGS_')) throw err;
    throw new CliError(`${(err as Error).message}\n\n${USAGE}`, EXIT.usage);
  }
}

async function main(argv: string[]): Promise<number> {
  const { values, positionals } = parseFlags({
    args: argv,
    allowPositionals: true,
    options: {
      json: { type: 'boolean', default: false },
      help: { type: 'boolean', default: false },
      wait: { type: 'boolean', default: false },
      follow: { type: 'boolean', default: false },
      'no-follow': { type: 'boolean', default: false },
      tree: { type: 'boolean', default: false },
      schema: { type: 'string' },
      'agent-options': { type: 'string' },
      cwd: { type: 'string' },
      'max-depth': { type: 'string' },
      reason: { type: 'string' },
      provider: { type: 'string' },
      status: { type: 'string' },
      limit: { type: 'string' },
      out: { type: 'string' },
      'public-key': { type: 'string' },
      'against-server': { type: 'boolean', default: false },
      port: { type: 'string' },
      'ui-port': { type: 'string' },
    },
  });
  const flags: Flags = { json: Boolean(values.json), values, positionals };
  const [command, ...rest] = positionals;
  if (values.help || !command) {
    console.log(USAGE);
    return values.help ? EXIT.ok : EXIT.usage;
  }
  switch (command) {
    case 'dev':
      return (await import('./server')).dev(flags);
    case 'worker':
      return (await import('./server')).worker();
    case 'audit':
      if (rest[0] === 'verify') return auditVerify(flags, need(rest[1], 'audit verify <file>'));
      if (rest[0] === 'keygen') return auditKeygen(flags);
      if (rest[0] === 'export') {
        return withClient(({ client }) => auditExport(flags, client, need(rest[1], 'audit export <id>')));
      }
      throw new CliError(
        'usage: subagents audit export <id> | audit verify <file> | audit keygen --out PREFIX',
        EXIT.usage,
      );
    case 'setup':
      return withClient(async ({ connection, namespace }) => {
        const added = await ensureSearchAttributes(connection, namespace);
        out(
          flags,
          added.length
            ? `registered ${added.join(', ')} on ${namespace}`
            : `search attributes already registered on ${namespace}`,
          { added },
        );
        return EXIT.ok;
      });
    case 'start':
      return withClient(({ client }) =>
        start(flags, client, need(rest[0], 'start <provider> <prompt>'), need(rest[1], 'start <provider> <prompt>')),
      );
    case 'list':
      return withClient(({ client }) => list(flags, client));
    case 'show':
      return withClient(({ client }) => show(flags, client, need(rest[0], 'show <id>')));
    case 'send':
      return withClient(({ client }) =>
        send(flags, client, need(rest[0], 'send <id> <message>'), need(rest[1], 'send <id> <message>')),
      );
    case 'cancel':
      return withClient(({ client }) => cancel(flags, client, need(rest[0], 'cancel <id>')));
    case 'resume':
      return withClient(({ client }) =>
        resume(flags, client, need(rest[0], 'resume <id> <message>'), need(rest[1], 'resume <id> <message>')),
      );
    case 'approve':
    case 'deny': {
      const usage = `${command} <id> <request>`;
      const [id, request] = [need(rest[0], usage), need(rest[1], usage)];
      const decision = command === 'approve' ? 'allow' : 'deny';
      return withClient(({ client }) => answerApproval(flags, client, id, request, decision));
    }
    case 'logs':
      return withClient(({ client }) => logs(flags, client, need(rest[0], 'logs <id>')));
    default:
      throw new CliError(`unknown command "${command}"\n\n${USAGE}`, EXIT.usage);
  }
}

/**
 * Resolves once what was written to `stream` is with the system: `process.exit` drops what a pipe
 * had not taken yet (all but its first 64 KB of a long `audit export` or `logs`).
 */
const flushed = (stream: NodeJS.WriteStream) => new Promise<void>((resolve) => stream.write('', () => resolve()));

/** Exits with `code` once stdout and stderr are flushed. */
const exit = async (code: number) => {
  await Promise.all([flushed(process.stdout), flushed(process.stderr)]);
  process.exit(code);
};

// A reader that has gone is told to the next print, not thrown as an uncaught 'error' event.
watchOutput(process.stdout);
watchOutput(process.stderr);
main(process.argv.slice(2)).then(
  (code) => exit(code),
  (thrown: unknown) => {
    // A run read without the keys its payloads were sealed with: say so, not the converter's words.
    const err = sealedWithoutCodec(thrown) ?? thrown;
    if (err instanceof ReaderGone) return exit(err.exitCode);
    if (err instanceof CliError) {
      console.error(err.message);
      return exit(err.exitCode);
    }
    if (err instanceof SubagentError) {
      console.error(`${err.code}: ${err.message}`);
      return exit(
        err.code === 'UNKNOWN_RUN' || err.code === 'UNKNOWN_APPROVAL'
          ? EXIT.unknownRun
          : err.code === 'UNAVAILABLE'
            ? EXIT.unreachable
            : EXIT.failed,
      );
    }
    console.error(err instanceof Error ? err.message : String(err));
    return exit(EXIT.failed);
  },
);

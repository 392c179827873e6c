// `subagents audit`: a run's history exported as hash-chained, signed JSONL; a file verified, by
// its chain, by its signatures against a public key, and against the server's own history; and a
// signing key pair made.
import { readFileSync, writeFileSync } from 'node:fs';
import type { Client } from '@temporalio/client';
import {
  type AuditDraft,
  type AuditRecord,
  auditDrafts,
  auditSignerFromEnv,
  exportAudit,
  generateAuditKeyPair,
  verifyAudit,
} from '../audit';
import { SIGNATURE_RECORD } from '../audit/chain';
import { canonicalJson } from '../seam/json';
import { CliError, EXIT, Flags, describeOrUnknown, out, withClient } from './common';

export async function auditExport(flags: Flags, client: Client, id: string): Promise<number> {
  await describeOrUnknown(client.workflow.getHandle(id), id);
  const records = await exportAudit(client, id, auditSignerFromEnv());
  const jsonl = records.map((record) => JSON.stringify(record)).join('\n') + '\n';
  if (flags.values.out) {
    writeFileSync(String(flags.values.out), jsonl);
    if (!flags.json) console.error(`wrote ${records.length} records to ${flags.values.out}`);
    else console.log(JSON.stringify({ id, records: records.length, file: flags.values.out }));
  } else {
    process.stdout.write(jsonl);
  }
  return EXIT.ok;
}

/**
 * Checks a file: its chain always; its signatures with `--public-key FILE`; and with
 * `--against-server`, every record against the one the server's history gives today.
 */
export async function auditVerify(flags: Flags, file: string): Promise<number> {
  const lines = readFileSync(file, 'utf8')
    .split('\n')
    .filter((line) => line.trim() !== '');
  let records: unknown[];
  try {
    records = lines.map((line) => JSON.parse(line) as unknown);
  } catch {
    out(flags, `${file}: not JSONL`, { ok: false, reason: 'not JSONL' });
    return EXIT.tampered;
  }
  const publicKey = flags.values['public-key'] ? readFileSync(String(flags.values['public-key']), 'utf8') : undefined;
  const verdict = verifyAudit(records, publicKey === undefined ? {} : { publicKey });
  if (!verdict.ok) {
    out(flags, `${file}: record ${verdict.seq}: ${verdict.reason}`, verdict);
    return EXIT.tampered;
  }
  if (!flags.values['against-server']) {
    const how = verdict.signed
      ? 'chain intact, signatures verified'
      : 'chain intact (signatures not checked: no --public-key)';
    out(flags, `${file}: ${verdict.records} records, ${how}`, verdict);
    return EXIT.ok;
  }
  const runId = (records[0] as AuditRecord).data as { runId?: string };
  return withClient(async ({ client }) => {
    const differences = await differencesFromServer(client, String(runId.runId), records as AuditRecord[]);
    if (differences.length > 0) {
      out(flags, [`${file}: differs from the server's history:`, ...differences.map((d) => `  ${d}`)].join('\n'), {
        ok: false,
        differences,
      });
      return EXIT.tampered;
    }
    out(flags, `${file}: ${verdict.records} records, chain intact, every record as the server's history has it`, {
      ...verdict,
      againstServer: true,
    });
    return EXIT.ok;
  });
}

/** Every way the file's records differ from those the server's history gives now, record by record. */
async function differencesFromServer(client: Client, runId: string, records: AuditRecord[]): Promise<string[]> {
  const server: AuditDraft[] = [];
  for await (const draft of auditDrafts(client, runId, false)) server.push(draft);
  const filed = records.filter((record) => record.seq > 0 && record.type !== SIGNATURE_RECORD);
  const same = (a: AuditDraft, b: AuditDraft) =>
    a.type === b.type && a.time === b.time && canonicalJson(a.data) === canonicalJson(b.data);
  const differences: string[] = [];
  for (let index = 0; index < Math.max(filed.length, server.length); index++) {
    const mine = filed[index];
    const theirs = server[index];
    if (mine && theirs && same(mine, theirs)) continue;
    if (!theirs) differences.push(`record ${mine!.seq} (${mine!.type}) is not in the server's history`);
    else if (!mine) differences.push(`the server's history has a ${theirs.type} at ${theirs.time} the file lacks`);
    else {
      differences.push(
        `record ${mine.seq}: the file has ${mine.type} at ${mine.time}, the server ${theirs.type} at ${theirs.time}` +
          (mine.type === theirs.type && mine.time === theirs.time ? ' with other data' : ''),
      );
    }
  }
  return differences;
}

/** Writes a new Ed25519 key pair: `<prefix>.key` (private, owner-only) and `<prefix>.pub`. */
export function auditKeygen(flags: Flags): number {
  const prefix = flags.values.out ? String(flags.values.out) : undefined;
  if (!prefix) throw new CliError('usage: subagents audit keygen --out PREFIX', EXIT.usage);
  const { privateKey, publicKey } = generateAuditKeyPair();
  writeFileSync(`${prefix}.key`, privateKey, { mode: 0o600 });
  writeFileSync(`${prefix}.pub`, publicKey);
  out(flags, `wrote ${prefix}.key (keep it secret: SUBAGENT_AUDIT_SIGNING_KEY=file:${prefix}.key) and ${prefix}.pub`, {
    privateKey: `${prefix}.key`,
    publicKey: `${prefix}.pub`,
  });
  return EXIT.ok;
}

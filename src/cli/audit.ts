// `subagents audit`: a run's history exported as hash-chained JSONL, and a chain verified.
import { readFileSync, writeFileSync } from 'node:fs';
import type { Client } from '@temporalio/client';
import { exportAudit, verifyAudit } from '../audit';
import { EXIT, Flags, out } from './common';

export async function auditExport(flags: Flags, client: Client, id: string): Promise<number> {
  const records = await exportAudit(client, id);
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

export function auditVerify(flags: Flags, file: string): number {
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
  const verdict = verifyAudit(records);
  out(
    flags,
    verdict.ok
      ? `${file}: ${verdict.records} records, chain intact`
      : `${file}: record ${verdict.seq}: ${verdict.reason}`,
    verdict,
  );
  return verdict.ok ? EXIT.ok : EXIT.tampered;
}

// A run's audit trail: exported from its history as hash-chained records, and verified.
export {
  type AuditDraft,
  type AuditRecord,
  type AuditSignature,
  type AuditSigner,
  type AuditVerdict,
  type VerifyAuditOptions,
  auditSignerFromEnv,
  ed25519AuditSigner,
  generateAuditKeyPair,
  sealAudit,
  sealAuditRecords,
  verifyAudit,
  verifyAuditRecords,
} from './chain';
export { auditDrafts, exportAudit, streamAudit } from './history';

// A run's audit trail: exported from its history as hash-chained records, and verified.
export { type AuditDraft, type AuditRecord, type AuditVerdict, sealAudit, verifyAudit } from './chain';
export { auditDrafts, exportAudit } from './history';

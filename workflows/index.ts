// The worker's only workflow entry.
export { subagentRunWorkflow } from './subagent-run';
export { tokenLimiterWorkflow } from './token-limiter';

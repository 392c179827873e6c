// The worker's only workflow entry. Every module it imports is evaluated once per worker thread
// and shared, frozen, by all the runs there (`preloadModules` in src/worker/worker.ts): keep no
// state at module level, only in a workflow function's scope.
export { subagentRunWorkflow } from './subagent-run';
export { tokenLimiterWorkflow } from './token-limiter';

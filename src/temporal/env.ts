// Reading a setting from the environment: a flag is `true` or `false`, and nothing else.
import { SubagentError } from '../seam/errors';

/**
 * The flag `name` holds: `true` or `false`, `fallback` when unset or empty. Anything else is
 * `INVALID_CONFIG`: `TRUE` or `yes` had read as false, turning off what the operator meant on.
 */
export function envFlag(env: NodeJS.ProcessEnv, name: string, fallback = false): boolean {
  const raw = env[name]?.trim();
  if (!raw) return fallback;
  if (raw === 'true' || raw === 'false') return raw === 'true';
  throw new SubagentError(`${name} must be true or false (got "${raw.slice(0, 40)}")`, 'INVALID_CONFIG');
}

// The built-in providers by name, configured from the environment, for processes started by
// command (the worker entry point, the CLI): spawn, fork, scripted, acp.
import { SubagentError } from '../seam/errors';
import type { SubagentHostedProvider } from '../seam/provider';
import { envFlag } from '../temporal/env';
import { createScriptedProvider } from './scripted';
import { createAcpProvider } from './acp';
import { createForkProvider, createSpawnProvider } from './llm';

const BUILTIN: Record<string, (env: NodeJS.ProcessEnv) => SubagentHostedProvider> = {
  spawn: () => createSpawnProvider(),
  fork: () => createForkProvider(),
  scripted: () => createScriptedProvider(),
  acp: (env) => {
    const [command, ...args] = (env.SUBAGENT_ACP_COMMAND ?? '').split(/\s+/).filter(Boolean);
    if (!command) {
      throw new SubagentError('the acp provider needs SUBAGENT_ACP_COMMAND, its command line', 'INVALID_CONFIG');
    }
    return createAcpProvider({ command, args, resumable: envFlag(env, 'SUBAGENT_ACP_RESUMABLE') });
  },
};

export const BUILTIN_PROVIDERS = Object.keys(BUILTIN);

/** One built-in provider; `INVALID_CONFIG` for a name that is not one, listing those that are. */
export function builtinProvider(name: string, env: NodeJS.ProcessEnv = process.env): SubagentHostedProvider {
  // Own names only: `constructor`, `toString` and the like are the table's too, by inheritance.
  const create = Object.hasOwn(BUILTIN, name) ? BUILTIN[name] : undefined;
  if (!create) {
    throw new SubagentError(
      `"${name}" is not a built-in provider (built in: ${BUILTIN_PROVIDERS.join(', ')})`,
      'INVALID_CONFIG',
    );
  }
  return create(env);
}

/** The providers SUBAGENT_PROVIDERS names (comma-separated), `fallback` when it is unset. */
export function providersFromEnv(
  env: NodeJS.ProcessEnv = process.env,
  fallback = 'spawn,fork',
): SubagentHostedProvider[] {
  const names = (env.SUBAGENT_PROVIDERS ?? fallback)
    .split(',')
    .map((name) => name.trim())
    .filter(Boolean);
  return names.map((name) => builtinProvider(name, env));
}

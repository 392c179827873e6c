// How to run the ACP test agent (acp-test-agent.ts) as the command of an `acp` provider: this
// Node, with tsx for the TypeScript source, and its script and log in the environment.
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import type { AcpAgentScript } from './acp-test-agent';

/** The ACP test agent's entry file (the .ts source, or its build). */
export const ACP_TEST_AGENT_ENTRY = join(__dirname, `acp-test-agent${__filename.endsWith('.ts') ? '.ts' : '.js'}`);

/**
 * The command, arguments and environment that run the ACP test agent with `script`; with `log`,
 * it appends each event (start, prompt, cancel, exit) to that file as a JSON line.
 */
export function acpTestAgentCommand(
  script: AcpAgentScript,
  log?: string,
): { command: string; args: string[]; env: Record<string, string> } {
  const loader = ACP_TEST_AGENT_ENTRY.endsWith('.ts') ? ['--import', pathToFileURL(require.resolve('tsx')).href] : [];
  return {
    command: process.execPath,
    args: [...loader, ACP_TEST_AGENT_ENTRY],
    env: { ACP_AGENT_SCRIPT: JSON.stringify(script), ...(log === undefined ? {} : { ACP_AGENT_LOG: log }) },
  };
}

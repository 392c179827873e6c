// The tool's side effect, run as a Temporal activity on the peer's worker.
import { readdir } from 'node:fs/promises';

export interface PeerActivities {
  listDirectory(): Promise<string>;
}

/** Activities bound to the directory the runner was given (`--dir`). */
export function createPeerActivities(dir: string): PeerActivities {
  return {
    async listDirectory() {
      return (await readdir(dir)).join('\n');
    },
  };
}

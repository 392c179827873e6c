// Separate network hosts on one machine for fleet tests: Linux network namespaces joined by a
// bridge whose private address only this machine's namespaces can reach, and a relay from it to
// a server on loopback. Needs root and iproute2.
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { type AddressInfo, type Socket, connect, createServer } from 'node:net';

export interface VirtualHosts {
  /** The bridge address in the test's own namespace: where hosts reach the test's relays. */
  readonly bridgeIp: string;
  /** Per host: the command prefix that runs a process inside it. */
  readonly hosts: { name: string; ip: string; exec: string[] }[];
  remove(): void;
}

const ip = (...args: string[]) => execFileSync('ip', args, { stdio: 'pipe' });

/** Creates `count` hosts, or returns undefined where namespaces cannot be made (no root, no iproute2). */
export function createVirtualHosts(count: number): VirtualHosts | undefined {
  const id = randomBytes(3).toString('hex');
  const subnet = `10.${200 + (parseInt(id.slice(0, 2), 16) % 50)}.${parseInt(id.slice(2, 4), 16)}`;
  const bridge = `sab${id}`;
  const created: string[] = [];
  const remove = () => {
    for (const ns of created) {
      try {
        ip('netns', 'del', ns);
      } catch {
        // already gone
      }
    }
    try {
      ip('link', 'del', bridge);
    } catch {
      // never made
    }
  };
  try {
    ip('link', 'add', bridge, 'type', 'bridge');
    ip('addr', 'add', `${subnet}.1/24`, 'dev', bridge);
    ip('link', 'set', bridge, 'up');
    const hosts = Array.from({ length: count }, (_, index) => {
      const name = `sa${id}h${index + 1}`;
      const hostIp = `${subnet}.${11 + index}`;
      ip('netns', 'add', name);
      created.push(name);
      const veth = `sav${id}${index + 1}`;
      ip('link', 'add', veth, 'type', 'veth', 'peer', 'name', 'eth0', 'netns', name);
      ip('link', 'set', veth, 'master', bridge, 'up');
      ip('netns', 'exec', name, 'ip', 'addr', 'add', `${hostIp}/24`, 'dev', 'eth0');
      ip('netns', 'exec', name, 'ip', 'link', 'set', 'eth0', 'up');
      ip('netns', 'exec', name, 'ip', 'link', 'set', 'lo', 'up');
      return { name, ip: hostIp, exec: ['ip', 'netns', 'exec', name] };
    });
    return { bridgeIp: `${subnet}.1`, hosts, remove };
  } catch {
    remove();
    return undefined;
  }
}

/**
 * A TCP relay from `listenIp` (the bridge) to `target` (the server on 127.0.0.1), so hosts in
 * other namespaces reach a server that itself listens on loopback only.
 */
export async function relay(listenIp: string, target: string): Promise<{ address: string; close(): Promise<void> }> {
  const [targetHost, targetPort] = [
    target.slice(0, target.lastIndexOf(':')),
    Number(target.slice(target.lastIndexOf(':') + 1)),
  ];
  const sockets = new Set<Socket>();
  const server = createServer((inbound) => {
    const outbound = connect(targetPort, targetHost);
    for (const socket of [inbound, outbound]) {
      sockets.add(socket);
      socket.on('close', () => sockets.delete(socket));
      socket.on('error', () => {
        inbound.destroy();
        outbound.destroy();
      });
    }
    inbound.pipe(outbound).pipe(inbound);
  });
  await new Promise<void>((listening) => server.listen(0, listenIp, listening));
  const { port } = server.address() as AddressInfo;
  return {
    address: `${listenIp}:${port}`,
    close: () =>
      new Promise<void>((closed) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => closed());
      }),
  };
}

import { Client } from '@temporalio/client';
import { NativeConnection } from '@temporalio/worker';
import { startDevServer } from '../src/dev-server';
async function main() {
  const server = await startDevServer();
  const connection = await NativeConnection.connect({ address: server.address });
  const client = new Client({ connection });
  await connection.close();
  try { await client.workflow.getHandle('x').describe(); } catch (e: any) {
    console.log('err', e.constructor.name, e.message, 'code', e.code, 'cause', e.cause?.constructor?.name, e.cause?.code, e.cause?.message);
  }
  await server.stop();
}
main();

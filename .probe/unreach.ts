import { Client, isGrpcServiceError } from '@temporalio/client';
import { NativeConnection } from '@temporalio/worker';
import { startDevServer } from '../src/dev-server';
async function main() {
  const server = await startDevServer();
  const connection = await NativeConnection.connect({ address: server.address });
  const client = new Client({ connection });
  await server.stop();
  const t = Date.now();
  try { await client.workflow.getHandle('x').describe(); } catch (e: any) {
    console.log('err', e.constructor.name, e.message, 'code', e.code, 'grpc?', isGrpcServiceError(e), 'cause', e.cause?.constructor?.name, e.cause?.code, e.cause?.message, Date.now() - t, 'ms');
  }
  await connection.close();
}
main();

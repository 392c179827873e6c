// The CLI's writer to stdout and stderr. It waits while a slow reader (a pipe into `less`, a log
// shipper) catches up, so a command holds one buffer's worth of output at most, and it stops a
// command whose reader has gone (EPIPE), as Unix tools stop at SIGPIPE.
import { CliError, EXIT } from './common';

/**
 * Thrown by `print` once its stream's reader has gone: the command stops where it is (a history
 * being read is read no further) and the CLI exits 0, saying nothing.
 */
export class ReaderGone extends CliError {
  constructor() {
    super('', EXIT.ok);
  }
}

/** The first error of each watched stream: process.stdout and stderr never keep theirs. */
const failures = new Map<NodeJS.WritableStream, Error>();

const failure = (err: Error) => ((err as NodeJS.ErrnoException).code === 'EPIPE' ? new ReaderGone() : err);

/**
 * Keeps `stream`'s first error for `print` to throw. Without a listener, the EPIPE of a reader
 * gone was an uncaught 'error' event: the CLI printed its stack and exited 1. Called for stdout and
 * stderr before anything is written.
 */
export function watchOutput(stream: NodeJS.WritableStream): void {
  stream.on('error', (err: Error) => {
    if (!failures.has(stream)) failures.set(stream, err);
  });
}

/**
 * Writes `text` to `stream` (stdout unless told). Resolves at once while the stream holds less
 * than its high-water mark, else once it has drained: a command that awaits each print holds one
 * buffer's worth, whatever its reader's pace. Rejects with `ReaderGone` once the stream's reader
 * has gone (EPIPE), and with the stream's error for any other.
 */
export async function print(text: string, stream: NodeJS.WritableStream = process.stdout): Promise<void> {
  const failed = failures.get(stream);
  if (failed) throw failure(failed);
  if (stream.write(text)) return;
  await new Promise<void>((resolve, reject) => {
    const settle = (err?: Error) => {
      stream.off('drain', settle);
      stream.off('error', settle);
      if (err) reject(failure(err));
      else resolve();
    };
    stream.on('drain', settle);
    stream.on('error', settle);
  });
}

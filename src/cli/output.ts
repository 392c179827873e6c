// The CLI's writer to stdout and stderr. It waits while a slow reader (a pipe into `less`, a log
// shipper) catches up, so a command holds one buffer's worth of output at most, and it stops a
// command whose reader has gone (EPIPE), as Unix tools stop at SIGPIPE.
import { closeSync, constants, fstatSync, openSync, readlinkSync } from 'node:fs';
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

/** How often `readerWatch` asks whether a named FIFO still has a reader. */
const FIFO_PROBE_MS = 200;

/**
 * Watches for `stream`'s reader to go while the command writes nothing (`logs --follow` of a
 * quiet run waits on a long poll, for days maybe): the signal aborts, its reason a `ReaderGone`
 * (or the stream's error), once the stream fails or closes, or, for output into a named FIFO on
 * Linux, once the FIFO has no reader left (opening it to write without blocking fails ENXIO then;
 * it is asked every 200 ms). The reader of an anonymous pipe (`| head -1`) is not watched: Node
 * has no way to see it go but a write, which the next print makes. `stop()` ends the watch.
 */
export function readerWatch(stream: NodeJS.WriteStream = process.stdout): { signal: AbortSignal; stop(): void } {
  const gone = new AbortController();
  const onError = (err: Error) => gone.abort(failure(err));
  const onClose = () => gone.abort(new ReaderGone());
  stream.on('error', onError);
  stream.on('close', onClose);
  const failed = failures.get(stream);
  if (failed) gone.abort(failure(failed));
  const fifo = namedFifo(stream);
  const probe = fifo
    ? setInterval(() => {
        try {
          closeSync(openSync(fifo, constants.O_WRONLY | constants.O_NONBLOCK));
        } catch (err) {
          if ((err as NodeJS.ErrnoException).code === 'ENXIO') gone.abort(new ReaderGone());
        }
      }, FIFO_PROBE_MS).unref()
    : undefined;
  return {
    signal: gone.signal,
    stop() {
      clearInterval(probe);
      stream.off('error', onError);
      stream.off('close', onClose);
    },
  };
}

/**
 * The path that opens `stream`'s FIFO again, when its descriptor is a named FIFO on Linux
 * (`/proc/self/fd/N`); undefined for anything else. An anonymous pipe (`pipe:[…]`) opens again
 * whether or not it has a reader, so asking it would tell nothing.
 */
function namedFifo(stream: NodeJS.WriteStream): string | undefined {
  const fd = (stream as { fd?: unknown }).fd;
  if (process.platform !== 'linux' || typeof fd !== 'number') return undefined;
  try {
    const path = `/proc/self/fd/${fd}`;
    return fstatSync(fd).isFIFO() && !readlinkSync(path).startsWith('pipe:') ? path : undefined;
  } catch {
    return undefined;
  }
}

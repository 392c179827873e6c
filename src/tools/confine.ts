// The one way file tools and the ACP file system touch files: confined to the run's working
// directory. A path is opened first and judged by what was opened: the kernel's own record of an
// open handle (/proc/self/fd) says where it really is, so a symlink anywhere on the way, or one
// swapped in between a check and a use, cannot lead outside. Only regular files are read or
// written (never a FIFO, a device or a socket), and writes create what they need one directory at
// a time, each opened and judged before anything is made in it. Refusals are messages for the model.
import { constants, type Dirent } from 'node:fs';
import * as fs from 'node:fs/promises';
import * as path from 'node:path';

/** A path the model asked for that the tools refuse; the message is written for the model. */
export class ToolPathError extends Error {
  override readonly name = 'ToolPathError';
}

/** Kernel file systems no working directory may be on. */
const SYSTEM_TREES = ['/proc', '/sys', '/dev'];
/** Where the kernel shows what an open handle is; absent off Linux (then the path is resolved instead). */
const OPEN_HANDLES = '/proc/self/fd';

const { O_RDONLY, O_WRONLY, O_CREAT, O_NOFOLLOW, O_NONBLOCK, O_NOCTTY, O_DIRECTORY } = constants;
/** Reading never blocks (a FIFO opens at once, to be refused) and never takes a terminal. */
const READ_FLAGS = O_RDONLY | O_NONBLOCK | O_NOCTTY;

export interface ConfinedFile {
  readonly handle: fs.FileHandle;
  /** Where the file really is. */
  readonly real: string;
  readonly size: number;
}

/** What a directory entry is, a symlink followed. */
export type ConfinedEntryKind =
  | { kind: 'directory'; real: string }
  | { kind: 'file'; size: number }
  | { kind: 'other' }
  | { kind: 'outside' }
  | { kind: 'missing' };

export interface ConfinedDirectory {
  readonly real: string;
  /** The directory's entries, read from the opened directory itself. */
  readonly entries: Dirent[];
  /** One entry, opened by name for reading: a regular file. Throws ToolPathError as `openFile` does. */
  openFile(name: string): Promise<ConfinedFile>;
  /** One entry, opened by name as a directory. Throws ToolPathError as `openDirectory` does. */
  openDirectory(name: string): Promise<ConfinedDirectory>;
  /** What one entry is, a symlink followed; `outside` when it leads out of the working directory. */
  kind(name: string): Promise<ConfinedEntryKind>;
  close(): Promise<void>;
}

/** The run's working directory, opened and checked once, through which every access goes. */
export class ConfinedRoot {
  /** Where each handle this root opened really is (for paths off Linux, where the kernel does not show it). */
  private readonly reals = new WeakMap<fs.FileHandle, string>();

  private constructor(
    /** The working directory as given. */
    readonly cwd: string,
    /** Its real path. */
    readonly real: string,
  ) {}

  /**
   * Checks `cwd`: an absolute path that exists, not on /proc, /sys or /dev. Throws ToolPathError
   * otherwise; other faults are rethrown.
   */
  static async open(cwd: string): Promise<ConfinedRoot> {
    const shown = JSON.stringify(cwd);
    if (!path.isAbsolute(cwd) || cwd.includes('\0')) {
      throw new ToolPathError(`the working directory ${shown} is not an absolute path, so file tools are unavailable`);
    }
    let real: string;
    try {
      real = await fs.realpath(cwd);
    } catch (error) {
      if (errorCode(error) === 'ENOENT' || errorCode(error) === 'ENOTDIR') {
        throw new ToolPathError(`the working directory ${shown} does not exist on this worker`);
      }
      throw error;
    }
    if (SYSTEM_TREES.some((tree) => isInside(tree, real))) {
      throw new ToolPathError(`the working directory ${shown} is on ${real}, where file tools are not allowed`);
    }
    return new ConfinedRoot(path.resolve(cwd), real);
  }

  /**
   * Where `requested` (relative to the working directory) lies, checked by its spelling alone:
   * no NUL byte, not absolute, not climbing out with `..`.
   */
  lexical(requested: string): string {
    const quoted = JSON.stringify(requested);
    if (requested.includes('\0')) throw new ToolPathError(`path ${quoted} contains a NUL byte`);
    if (path.isAbsolute(requested)) {
      throw new ToolPathError(`path ${quoted} is absolute; use a path relative to the working directory`);
    }
    const lexical = path.resolve(this.cwd, requested);
    if (!isInside(this.cwd, lexical)) throw new ToolPathError(`path ${quoted} leaves the working directory`);
    return lexical;
  }

  /**
   * Whether `target` (absolute, or relative to the working directory) lies inside it, by its
   * spelling and then by the real path of its deepest part that exists: a symlink on the way that
   * leads out counts as outside. For judging what an agent asks to do, not for opening files.
   */
  async contains(target: string): Promise<boolean> {
    if (target.includes('\0')) return false;
    const absolute = path.resolve(this.cwd, target);
    if (!isInside(this.cwd, absolute)) return false;
    for (let existing = absolute; ; existing = path.dirname(existing)) {
      try {
        return isInside(this.real, await fs.realpath(existing));
      } catch (error) {
        if (errorCode(error) !== 'ENOENT' && errorCode(error) !== 'ENOTDIR') return false;
        if (path.dirname(existing) === existing) return false;
      }
    }
  }

  /** `requested` as the model sees it, relative to the working directory. */
  display(requested: string): string {
    const relative = path.relative(this.cwd, path.resolve(this.cwd, requested));
    return relative === '' ? '.' : relative.split(path.sep).join('/');
  }

  /**
   * Opens the regular file at `requested` for reading. Throws ToolPathError for a path that
   * leaves the working directory (by spelling or through a symlink), does not exist, or is not
   * a regular file (`EISDIR` is reported as its own message); the caller closes the handle.
   */
  async openFile(requested: string): Promise<ConfinedFile> {
    return this.regular(await this.openChecked(this.lexical(requested), READ_FLAGS, requested), requested);
  }

  /** Opens the directory at `requested` and reads its entries. Throws ToolPathError as `openFile` does. */
  async openDirectory(requested: string): Promise<ConfinedDirectory> {
    return this.directoryOf(
      await this.openChecked(this.lexical(requested), O_RDONLY | O_DIRECTORY, requested),
      requested,
    );
  }

  /**
   * Writes `content` to the file at `requested`, creating it and any missing directories on the
   * way. Each directory is opened and judged before anything is made in it; the file itself must
   * not be a symlink, and must be a regular file with no other name (a hard link). Throws
   * ToolPathError for anything else.
   */
  async writeFile(requested: string, content: string | Uint8Array): Promise<void> {
    const lexical = this.lexical(requested);
    const parts = path.relative(this.cwd, lexical).split(path.sep).filter(Boolean);
    const name = parts.pop();
    if (name === undefined) throw new ToolPathError(`path ${JSON.stringify(requested)} is the working directory`);
    let directory = (await this.openChecked(this.cwd, O_RDONLY | O_DIRECTORY, '.')).handle;
    try {
      for (const part of parts) {
        const next = this.within(directory, part);
        try {
          await fs.mkdir(next);
        } catch (error) {
          if (errorCode(error) !== 'EEXIST') throw fsRefusal(error, requested) ?? error;
        }
        const { handle } = await this.openChecked(next, O_RDONLY | O_DIRECTORY, requested);
        await directory.close();
        directory = handle;
      }
      let file: fs.FileHandle;
      try {
        file = await fs.open(
          this.within(directory, name),
          O_WRONLY | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY,
          0o644,
        );
      } catch (error) {
        if (errorCode(error) === 'ELOOP') {
          throw new ToolPathError(
            `path ${JSON.stringify(requested)} is a symbolic link; files are written only by their own name`,
          );
        }
        if (errorCode(error) === 'ENXIO' || errorCode(error) === 'EISDIR') {
          throw new ToolPathError(`${JSON.stringify(requested)} is not a regular file`);
        }
        throw fsRefusal(error, requested) ?? error;
      }
      try {
        const stat = await file.stat();
        if (!stat.isFile()) throw new ToolPathError(`${JSON.stringify(requested)} is not a regular file`);
        if (stat.nlink > 1) {
          throw new ToolPathError(`${JSON.stringify(requested)} has another name (a hard link); it is not written`);
        }
        await file.truncate(0);
        await file.writeFile(content);
      } finally {
        await file.close();
      }
    } finally {
      await directory.close();
    }
  }

  /** `name` inside an opened directory, as a path that reaches that very directory, whatever moves. */
  private within(directory: fs.FileHandle, name: string): string {
    return path.join(handlesShown ? path.join(OPEN_HANDLES, String(directory.fd)) : this.reals.get(directory)!, name);
  }

  /**
   * Opens `target`, then refuses it unless the opened handle lies inside the working directory.
   * A target whose path already resolves outside is refused before it is opened, so nothing
   * outside (a device's open, say) is touched in the common case; the handle's check is the one
   * that holds when something is swapped meanwhile.
   */
  private async openChecked(target: string, flags: number, requested: string): Promise<Opened> {
    const resolved = await fs.realpath(target).catch(() => undefined);
    if (resolved !== undefined && !isInside(this.real, resolved)) throw new OutsideError(requested);
    let handle: fs.FileHandle;
    try {
      handle = await fs.open(target, flags);
    } catch (error) {
      if (errorCode(error) === 'EISDIR') throw new IsDirectoryError(requested);
      if (errorCode(error) === 'ENOTDIR' && flags & O_DIRECTORY) throw new NotDirectoryError(requested);
      throw fsRefusal(error, requested) ?? error;
    }
    try {
      const real = await realPathOf(handle, target);
      if (!isInside(this.real, real)) throw new OutsideError(requested);
      this.reals.set(handle, real);
      return { handle, real };
    } catch (error) {
      await handle.close();
      throw error;
    }
  }

  /** An opened handle of a regular file; anything else is refused (and closed). */
  private async regular({ handle, real }: Opened, requested: string): Promise<ConfinedFile> {
    try {
      const stat = await handle.stat();
      if (stat.isDirectory()) throw new IsDirectoryError(requested);
      if (!stat.isFile()) throw new ToolPathError(`${JSON.stringify(requested)} is not a regular file`);
      return { handle, real, size: stat.size };
    } catch (error) {
      await handle.close();
      throw error;
    }
  }

  private async directoryOf({ handle, real }: Opened, requested: string): Promise<ConfinedDirectory> {
    let entries: Dirent[];
    try {
      entries = await fs.readdir(handlesShown ? path.join(OPEN_HANDLES, String(handle.fd)) : real, {
        withFileTypes: true,
      });
    } catch (error) {
      await handle.close();
      throw fsRefusal(error, requested) ?? error;
    }
    return {
      real,
      entries,
      openFile: async (name) => this.regular(await this.openChecked(this.within(handle, name), READ_FLAGS, name), name),
      openDirectory: async (name) =>
        this.directoryOf(await this.openChecked(this.within(handle, name), O_RDONLY | O_DIRECTORY, name), name),
      kind: async (name) => {
        let opened: Opened;
        try {
          opened = await this.openChecked(this.within(handle, name), READ_FLAGS, name);
        } catch (error) {
          if (error instanceof OutsideError) return { kind: 'outside' };
          if (isSkippableFsError(error) || error instanceof ToolPathError) return { kind: 'missing' };
          throw error;
        }
        try {
          const stat = await opened.handle.stat();
          if (stat.isDirectory()) return { kind: 'directory', real: opened.real };
          return stat.isFile() ? { kind: 'file', size: stat.size } : { kind: 'other' };
        } finally {
          await opened.handle.close();
        }
      },
      close: () => handle.close(),
    };
  }
}

/** A directory where a file was wanted; its own class so each tool can word it. */
export class IsDirectoryError extends ToolPathError {
  constructor(readonly requested: string) {
    super(`${JSON.stringify(requested)} is a directory`);
  }
}

/** A path that leads out of the working directory through a symbolic link. */
export class OutsideError extends ToolPathError {
  constructor(readonly requested: string) {
    super(`path ${JSON.stringify(requested)} leaves the working directory through a symbolic link`);
  }
}

/** A file where a directory was wanted. */
export class NotDirectoryError extends ToolPathError {
  constructor(readonly requested: string) {
    super(`${JSON.stringify(requested)} is not a directory`);
  }
}

/** Whether the kernel shows open handles (Linux). Off Linux, paths are resolved instead (a race remains). */
let handlesShown = true;

interface Opened {
  handle: fs.FileHandle;
  real: string;
}

async function realPathOf(handle: fs.FileHandle, fallback: string): Promise<string> {
  if (handlesShown) {
    try {
      return await fs.readlink(path.join(OPEN_HANDLES, String(handle.fd)));
    } catch (error) {
      if (errorCode(error) !== 'ENOENT') throw error;
      handlesShown = false;
    }
  }
  return fs.realpath(fallback);
}

export function isInside(root: string, candidate: string): boolean {
  const relative = path.relative(root, candidate);
  if (relative === '') return true;
  return relative !== '..' && !relative.startsWith(`..${path.sep}`) && !path.isAbsolute(relative);
}

export function fsRefusal(error: unknown, requested: string): ToolPathError | undefined {
  switch (errorCode(error)) {
    case 'ENOENT':
    case 'ENOTDIR':
      return new ToolPathError(`no such file or directory: ${requested}`);
    case 'EACCES':
    case 'EPERM':
      return new ToolPathError(`permission denied: ${requested}`);
    case 'ELOOP':
      return new ToolPathError(`too many levels of symbolic links: ${requested}`);
    case 'ENAMETOOLONG':
      return new ToolPathError(`path ${JSON.stringify(requested)} is too long`);
    case 'ENXIO':
      return new ToolPathError(`${JSON.stringify(requested)} is not a regular file`);
    default:
      return undefined;
  }
}

export function isSkippableFsError(error: unknown): boolean {
  const code = errorCode(error);
  return code === 'ENOENT' || code === 'ENOTDIR' || code === 'EACCES' || code === 'EPERM' || code === 'ELOOP';
}

export function errorCode(error: unknown): string | undefined {
  if (typeof error !== 'object' || error === null) return undefined;
  const code = (error as { code?: unknown }).code;
  return typeof code === 'string' ? code : undefined;
}

// Confinement of the file tools to the run's working directory: every path the model names is
// resolved inside it, symlinks included, and anything else is refused with a message for the model.
import * as fs from 'node:fs/promises';
import * as path from 'node:path';

/** A path the model asked for that the tools refuse; the message is written for the model. */
export class ToolPathError extends Error {
  override readonly name = 'ToolPathError';
}

/**
 * Resolves `requested` inside `cwd` and returns its real absolute path (symlinks resolved).
 * Throws ToolPathError when `cwd` is not an absolute path or does not exist here, when
 * `requested` holds a NUL byte, is absolute (even if it points inside `cwd`), climbs out of
 * `cwd` with `..`, does not exist, or resolves through a symlink to a place outside
 * `realpath(cwd)`. Other filesystem faults are rethrown as they are.
 */
export async function resolveInside(cwd: string, requested: string): Promise<string> {
  const quoted = JSON.stringify(requested);
  if (requested.includes('\0')) throw new ToolPathError(`path ${quoted} contains a NUL byte`);
  if (path.isAbsolute(requested)) {
    throw new ToolPathError(`path ${quoted} is absolute; use a path relative to the working directory`);
  }
  if (!path.isAbsolute(cwd) || cwd.includes('\0')) {
    throw new ToolPathError(
      `the working directory ${JSON.stringify(cwd)} is not an absolute path, so file tools are unavailable`,
    );
  }
  const root = path.resolve(cwd);
  const lexical = path.resolve(root, requested);
  if (!isInside(root, lexical)) throw new ToolPathError(`path ${quoted} leaves the working directory`);

  let realRoot: string;
  try {
    realRoot = await fs.realpath(root);
  } catch (error) {
    if (errorCode(error) === 'ENOENT' || errorCode(error) === 'ENOTDIR') {
      throw new ToolPathError(`the working directory ${JSON.stringify(cwd)} does not exist on this worker`);
    }
    throw error;
  }
  let real: string;
  try {
    real = await fs.realpath(lexical);
  } catch (error) {
    throw fsRefusal(error, requested) ?? error;
  }
  if (!isInside(realRoot, real)) {
    throw new ToolPathError(`path ${quoted} leaves the working directory through a symbolic link`);
  }
  return real;
}

export function isInside(root: string, candidate: string): boolean {
  const relative = path.relative(root, candidate);
  if (relative === '') return true;
  return relative !== '..' && !relative.startsWith(`..${path.sep}`) && !path.isAbsolute(relative);
}

export function displayPath(cwd: string, requested: string): string {
  const root = path.resolve(cwd);
  const relative = path.relative(root, path.resolve(root, requested));
  return relative === '' ? '.' : relative.split(path.sep).join('/');
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

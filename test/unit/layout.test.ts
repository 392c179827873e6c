// The layout's rules, over every import of the shipped code, type imports included (ESLint's
// cycle rule sees value imports only): no import cycles, nothing outside test/ imports test/,
// the seam's vocabulary imports nothing else of the project, and workflows import activities by
// type only.
import { existsSync, readFileSync, readdirSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import * as ts from 'typescript';

const ROOT = join(__dirname, '..', '..');
const SHIPPED = ['src', 'workflows', 'activities', 'bench', 'scripts'];

function sourceFiles(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    // A package's own dependencies (the benchmark's peer has some) are not the project's files.
    if (name === 'node_modules') return [];
    if (statSync(path).isDirectory()) return sourceFiles(path);
    return path.endsWith('.ts') ? [path] : [];
  });
}

/** The project files `file` imports (static, type-only, re-exports and dynamic), as paths from the root. */
function importsOf(file: string): { target: string; typeOnly: boolean }[] {
  const text = readFileSync(file, 'utf8');
  const typeOnly = new Set(
    [...text.matchAll(/^(?:import|export) type [^;]*? from '([^']+)'/gm)].map((match) => match[1]!),
  );
  return ts
    .preProcessFile(text, true, true)
    .importedFiles.map((imported) => imported.fileName)
    .filter((name) => name.startsWith('.'))
    .map((name) => {
      const base = resolve(dirname(file), name);
      const target = [`${base}.ts`, join(base, 'index.ts'), base].find(
        (candidate) => existsSync(candidate) && statSync(candidate).isFile(),
      );
      if (!target) throw new Error(`${relative(ROOT, file)} imports ${name}, which does not resolve`);
      return { target: relative(ROOT, target), typeOnly: typeOnly.has(name) };
    });
}

const graph = new Map(
  SHIPPED.flatMap((dir) => sourceFiles(join(ROOT, dir))).map(
    (file) => [relative(ROOT, file), importsOf(file)] as const,
  ),
);

/** Every cycle of the graph, as the files on it (Tarjan's strongly connected components). */
function cycles(): string[][] {
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const found: string[][] = [];
  const visit = (file: string) => {
    index.set(file, index.size);
    low.set(file, index.get(file)!);
    stack.push(file);
    for (const { target } of graph.get(file) ?? []) {
      if (!graph.has(target)) continue;
      if (!index.has(target)) {
        visit(target);
        low.set(file, Math.min(low.get(file)!, low.get(target)!));
      } else if (stack.includes(target)) {
        low.set(file, Math.min(low.get(file)!, index.get(target)!));
      }
    }
    if (low.get(file) === index.get(file)) {
      const component: string[] = [];
      let member: string;
      do {
        member = stack.pop()!;
        component.push(member);
      } while (member !== file);
      const selfImport = (graph.get(file) ?? []).some(({ target }) => target === file);
      if (component.length > 1 || selfImport) found.push(component.sort());
    }
  };
  for (const file of graph.keys()) if (!index.has(file)) visit(file);
  return found;
}

const importers = (accept: (file: string, target: string, typeOnly: boolean) => boolean) =>
  [...graph].flatMap(([file, imports]) =>
    imports
      .filter(({ target, typeOnly }) => accept(file, target, typeOnly))
      .map(({ target }) => `${file} -> ${target}`),
  );

describe('the layout', () => {
  it('reads the whole shipped tree', () => {
    expect(graph.size).toBeGreaterThan(60);
    expect(graph.has('src/seam/index.ts')).toBe(true);
  });

  it('has no import cycles, type imports included', () => {
    expect(cycles()).toEqual([]);
  });

  it('finds a cycle where there is one, so the check above can fail', () => {
    graph.set('src/zz-a.ts', [{ target: 'src/zz-b.ts', typeOnly: true }]);
    graph.set('src/zz-b.ts', [{ target: 'src/zz-a.ts', typeOnly: true }]);
    try {
      expect(cycles()).toEqual([['src/zz-a.ts', 'src/zz-b.ts']]);
    } finally {
      graph.delete('src/zz-a.ts');
      graph.delete('src/zz-b.ts');
    }
  });

  it('keeps test code out of shipped code', () => {
    expect(importers((_file, target) => target.startsWith('test/'))).toEqual([]);
  });

  it('keeps the seam vocabulary free of every other import of the project', () => {
    expect(importers((file, target) => file.startsWith('src/seam/') && !target.startsWith('src/seam/'))).toEqual([]);
  });

  it('lets workflows import activities by type only, and activities never import workflows', () => {
    expect(
      importers(
        (file, target, typeOnly) => file.startsWith('workflows/') && target.startsWith('activities/') && !typeOnly,
      ),
    ).toEqual([]);
    expect(importers((file, target) => file.startsWith('activities/') && target.startsWith('workflows/'))).toEqual([]);
  });
});

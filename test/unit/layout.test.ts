// The layout's rules, over every import of the shipped code, type imports included (ESLint's
// cycle rule sees value imports only): no import cycles, nothing outside test/ imports test/,
// the seam's vocabulary imports nothing else of the project, and workflows import activities by
// type only; and the modules a workflow loads keep no state at module level (a worker evaluates
// them once and shares them by all its runs: `preloadModules` in src/worker/worker.ts).
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

/** The project files a workflow loads: what workflows/index.ts imports for its values, and so on. */
function workflowModules(): string[] {
  const seen = new Set<string>();
  const visit = (file: string) => {
    if (seen.has(file)) return;
    seen.add(file);
    for (const { target, typeOnly } of graph.get(file) ?? []) if (!typeOnly) visit(target);
  };
  visit('workflows/index.ts');
  return [...seen].sort();
}

/**
 * What a module keeps at module level that a run could change, and so leak into the next run:
 * `let` and `var` bindings, objects made with `new` (a Map's entries survive freezing), and
 * static fields that are not readonly.
 */
function moduleState(file: string, text: string): string[] {
  const source = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true);
  const where = (node: ts.Node) => `${file}:${source.getLineAndCharacterOfPosition(node.getStart()).line + 1}`;
  const unwrapped = (node: ts.Expression): ts.Expression =>
    ts.isAsExpression(node) || ts.isSatisfiesExpression(node) || ts.isParenthesizedExpression(node)
      ? unwrapped(node.expression)
      : node;
  return source.statements.flatMap((statement) => {
    if (ts.isVariableStatement(statement)) {
      const { flags } = statement.declarationList;
      if (flags & (ts.NodeFlags.Let | ts.NodeFlags.Using) || !(flags & ts.NodeFlags.Const)) {
        return [`${where(statement)} declares a module-level variable`];
      }
      return statement.declarationList.declarations
        .filter((declaration) => declaration.initializer && ts.isNewExpression(unwrapped(declaration.initializer)))
        .map((declaration) => `${where(declaration)} makes an object with \`new\` at module level`);
    }
    if (ts.isClassDeclaration(statement)) {
      return statement.members
        .filter((member) => ts.isPropertyDeclaration(member))
        .filter((member) => {
          const modifiers = ts.getModifiers(member) ?? [];
          const has = (kind: ts.SyntaxKind) => modifiers.some((modifier) => modifier.kind === kind);
          return has(ts.SyntaxKind.StaticKeyword) && !has(ts.SyntaxKind.ReadonlyKeyword);
        })
        .map((member) => `${where(member)} has a static field that is not readonly`);
    }
    return [];
  });
}

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

  it('keeps no state at module level in what a workflow loads', () => {
    const modules = workflowModules();
    expect(modules).toEqual(expect.arrayContaining(['workflows/subagent-run.ts', 'src/seam/errors.ts']));
    expect(modules.flatMap((file) => moduleState(file, readFileSync(join(ROOT, file), 'utf8')))).toEqual([]);
  });

  it('finds module-level state where there is some, so the check above can fail', () => {
    const text = [
      'let counter = 0;',
      'const seen = new Map<string, number>();',
      'const LIMIT = 10;',
      'const NAMES = { a: 1 } as const;',
      'export class Cache { static entries: string[] = []; static readonly MAX = 3; }',
    ].join('\n');
    expect(moduleState('workflows/zz.ts', text)).toEqual([
      'workflows/zz.ts:1 declares a module-level variable',
      'workflows/zz.ts:2 makes an object with `new` at module level',
      'workflows/zz.ts:5 has a static field that is not readonly',
    ]);
  });
});

// Lint: typescript-eslint's recommended rules, and the project's layering as rules: no import
// cycles, nothing outside test/ imports test/, the seam's vocabulary imports nothing else of ours,
// and activities never import workflows. Formatting is Prettier's (`npm run format`).
import js from '@eslint/js';
import prettier from 'eslint-config-prettier';
import { createTypeScriptImportResolver } from 'eslint-import-resolver-typescript';
import importX from 'eslint-plugin-import-x';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['dist/', 'node_modules/', '.tools/', '.data/', 'coverage/', 'test/fixtures/builds/', 'bench/peer/'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  importX.flatConfigs.typescript,
  {
    settings: { 'import-x/resolver-next': [createTypeScriptImportResolver({ project: './tsconfig.json' })] },
    rules: {
      'import-x/no-cycle': 'error',
      'import-x/no-duplicates': 'error',
      'import-x/no-restricted-paths': [
        'error',
        {
          zones: [
            {
              target: ['./src', './workflows', './activities', './bench', './scripts'],
              from: './test',
              message: 'shipped code never imports test code',
            },
            {
              target: './src/seam',
              from: ['./src', './workflows', './activities'],
              except: ['./seam'],
              message: 'the vocabulary imports nothing else of the project',
            },
            { target: './activities', from: './workflows', message: 'activities never import workflows' },
          ],
        },
      ],
      '@typescript-eslint/no-unused-vars': [
        'error',
        { argsIgnorePattern: '^_', varsIgnorePattern: '^_', ignoreRestSiblings: true },
      ],
      '@typescript-eslint/no-explicit-any': 'off',
      // A run's state is declared before the handlers that read it and settled once, later.
      'prefer-const': ['error', { ignoreReadBeforeAssign: true }],
    },
  },
  {
    files: ['**/*.js', '**/*.mjs'],
    languageOptions: {
      globals: {
        require: 'readonly',
        module: 'writable',
        process: 'readonly',
        console: 'readonly',
        __dirname: 'readonly',
      },
    },
    rules: { '@typescript-eslint/no-require-imports': 'off' },
  },
  prettier,
  // After Prettier's config, which turns it off: a body on a line of its own gets braces.
  { rules: { curly: ['error', 'multi-line'] } },
);

import js from "@eslint/js";
import tseslint from "typescript-eslint";

export default tseslint.config(
  { ignores: ["node_modules/**", "dist/**", "web/dist/**", "coverage/**", "config/*.schema.json", "docs/**"] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    languageOptions: { globals: { process: "readonly", console: "readonly", setTimeout: "readonly", clearTimeout: "readonly", URL: "readonly" } },
    rules: {
      "@typescript-eslint/no-unused-vars": ["error", { argsIgnorePattern: "^_", varsIgnorePattern: "^_" }],
      "@typescript-eslint/consistent-type-imports": "error",
      "no-constant-condition": ["error", { checkLoops: false }],
    },
  },
  { files: ["**/*.cjs"], languageOptions: { sourceType: "commonjs", globals: { module: "writable", require: "readonly" } } },
  // Rooms of a readable size (issue 27): a file reads in one sitting, a function on one screen.
  // Blank lines and comments do not count; tests/unit/code-size.test.ts proves the rules bite.
  {
    files: ["src/**/*.ts", "channels/**/*.ts"],
    rules: {
      "max-lines": ["error", { max: 400, skipBlankLines: true, skipComments: true }],
      "max-lines-per-function": ["error", { max: 80, skipBlankLines: true, skipComments: true }],
    },
  },
  // The web console runs in the browser.
  { files: ["web/src/**"], languageOptions: { globals: { window: "readonly", document: "readonly", location: "readonly", localStorage: "readonly", crypto: "readonly", fetch: "readonly", WebSocket: "readonly", FileReader: "readonly", confirm: "readonly" } } },
);

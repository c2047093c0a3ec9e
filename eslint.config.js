// eslint flat config for the static site's JavaScript (classic browser scripts, no modules).
"use strict";
const js = require("@eslint/js");
const globals = require("globals");

module.exports = [
  // only the site scripts and this file are linted: never a virtual environment or anything installed
  {
    ignores: [
      "node_modules/",
      ".venv*/",
      "build/",
      "test-artifacts/",
      "src/labledger/site/static/vendor/",
      "**/*.d.ts",
    ],
  },
  {
    files: ["src/labledger/site/static/js/**/*.js"],
    languageOptions: {
      ecmaVersion: 2020,
      sourceType: "script",
      globals: { ...globals.browser, uPlot: "readonly" },
    },
    rules: {
      ...js.configs.recommended.rules,
      "no-unused-vars": ["error", { args: "none" }],
      "no-var": "off",
      eqeqeq: ["error", "always"],
      strict: ["error", "function"],
      "no-restricted-properties": [
        "error",
        { property: "innerHTML", message: "Use textContent or LL.h: strings from runs must show as text." },
        { property: "outerHTML", message: "Use textContent or LL.h: strings from runs must show as text." },
      ],
      "no-restricted-syntax": [
        "error",
        { selector: "CallExpression[callee.property.name='insertAdjacentHTML']", message: "No HTML strings." },
        { selector: "CallExpression[callee.name='fetch']", message: "Pages load data with <script> (file://)." },
      ],
    },
  },
  {
    files: ["eslint.config.js"],
    languageOptions: { sourceType: "commonjs", globals: globals.node },
    rules: js.configs.recommended.rules,
  },
];

/* The console's console.js: see the next commit. */

/** The runnable agent host has no library surface; see main.ts. */
export {};

/** The Redis Cluster slot of a key (CRC16 of its hash tag), as ioredis computes it; the package ships no types. */
declare module 'cluster-key-slot' {
  export default function calculateSlot(key: string): number;
}

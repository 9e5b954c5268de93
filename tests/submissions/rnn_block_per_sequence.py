# rnn_step, correct, another style: a block per sequence (batch row). The block stages h[t-1, b] in shared memory
# once, then its threads stride over the units; one launch per step, a grid of `batch` blocks.
import math

MAX_HIDDEN = 4096


@cuda.jit
def rnn_step(W, u, h, t):
    h_prev = cuda.shared.array(MAX_HIDDEN, np.float32)
    b = cuda.blockIdx.x
    hidden = u.shape[2]
    for j in range(cuda.threadIdx.x, hidden, cuda.blockDim.x):
        h_prev[j] = h[t - 1, b, j] if t > 0 else np.float32(0)
    cuda.syncthreads()
    for i in range(cuda.threadIdx.x, hidden, cuda.blockDim.x):
        z = u[t, b, i]
        for j in range(hidden):
            z += W[i, j] * h_prev[j]
        h[t, b, i] = math.tanh(z)


def run_rnn(W, u, h):
    steps, batch, hidden = u.shape
    for t in range(steps):
        rnn_step[batch, 64](W, u, h, t)

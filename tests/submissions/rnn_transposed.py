import math


@cuda.jit
def rnn_step(W, u, h, t):
    # as rnn_correct.py, but W is read transposed: right only when W is symmetric
    k = cuda.grid(1)
    batch, hidden = u.shape[1], u.shape[2]
    if k < batch * hidden:
        b = k // hidden
        i = k % hidden
        z = u[t, b, i]
        if t > 0:
            for j in range(hidden):
                z += W[j, i] * h[t - 1, b, j]
        h[t, b, i] = math.tanh(z)


def run_rnn(W, u, h):
    steps, batch, hidden = u.shape
    threads = 128
    blocks = (batch * hidden + threads - 1) // threads
    for t in range(steps):
        rnn_step[blocks, threads](W, u, h, t)

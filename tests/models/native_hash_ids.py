"""int64 ids hashed at run time: the values pass int32's range only with the real inputs (no constant is large),
so the static answer says nothing and the native-cpu stand-in sees them wrap at the hashing line."""
import torch


class Hasher(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Embedding(97, 4)

    def forward(self, ids):
        key = ids * 1_000_003 * 7_919  # EXPECT precision aten::mul.Tensor (values beyond int32 wrap on the device)
        return self.embed(key.remainder(97))


def get_model():
    return Hasher()


def get_example_inputs():
    return (torch.tensor([[5, 600, 7000, 123456]]),)

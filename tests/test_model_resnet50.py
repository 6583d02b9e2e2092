"""specs/resnet50.shape is ResNet-50 whole, as torchvision's resnet.py writes it: its parameter
total is torchvision's resnet50 (25,557,032), and the module generated from it gives the class
scores of a hand-written ResNet (torchvision's structure and parameter names: conv1 / bn1 /
maxpool, layer1..layer4 of Bottleneck blocks with the stride on the 3 x 3 conv and a
`downsample` of conv1x1 + BatchNorm2d on the first block of each stage, avgpool, fc) in eval
mode, given the same weights and running statistics."""
from __future__ import annotations

from pathlib import Path

import pytest
from torch_shapes import REDUCED

from shapelang.checker.checker import check_file
from shapelang.codegen import runner
from shapelang.codegen.generator import generate
from shapelang.render import check_text

SPEC = Path(__file__).resolve().parent.parent / "specs" / "resnet50.shape"
PUBLISHED = 25_557_032    # torchvision.models.resnet50().parameters(), summed


def test_the_parameter_total_is_the_published_one():
    spec = check_file(str(SPEC))
    assert spec.ok, check_text(spec)
    assert not spec.diagnostics, check_text(spec)        # no warning either
    assert spec.example_value(spec.total_params) == PUBLISHED


def _torchvision_resnet(torch, Cin, D, L1, L2, L3, L4, K, **_):
    """torchvision's ResNet(Bottleneck, [L1, L2, L3, L4]) with width D (64 in resnet50)."""
    nn = torch.nn

    class Bottleneck(nn.Module):
        expansion = 4

        def __init__(self, inplanes, planes, stride=1, downsample=None):
            super().__init__()
            self.conv1 = nn.Conv2d(inplanes, planes, 1, bias=False)
            self.bn1 = nn.BatchNorm2d(planes)
            self.conv2 = nn.Conv2d(planes, planes, 3, stride=stride, padding=1, bias=False)
            self.bn2 = nn.BatchNorm2d(planes)
            self.conv3 = nn.Conv2d(planes, planes * 4, 1, bias=False)
            self.bn3 = nn.BatchNorm2d(planes * 4)
            self.relu = nn.ReLU(inplace=True)
            self.downsample = downsample

        def forward(self, x):
            identity = x
            out = self.relu(self.bn1(self.conv1(x)))
            out = self.relu(self.bn2(self.conv2(out)))
            out = self.bn3(self.conv3(out))
            if self.downsample is not None:
                identity = self.downsample(x)
            return self.relu(out + identity)

    class ResNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.inplanes = D
            self.conv1 = nn.Conv2d(Cin, D, kernel_size=7, stride=2, padding=3, bias=False)
            self.bn1 = nn.BatchNorm2d(D)
            self.relu = nn.ReLU(inplace=True)
            self.maxpool = nn.MaxPool2d(kernel_size=3, stride=2, padding=1)
            self.layer1 = self._make_layer(D, L1)
            self.layer2 = self._make_layer(2 * D, L2, stride=2)
            self.layer3 = self._make_layer(4 * D, L3, stride=2)
            self.layer4 = self._make_layer(8 * D, L4, stride=2)
            self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
            self.fc = nn.Linear(8 * D * 4, K)

        def _make_layer(self, planes, blocks, stride=1):
            downsample = None
            if stride != 1 or self.inplanes != planes * 4:
                downsample = nn.Sequential(nn.Conv2d(self.inplanes, planes * 4, 1, stride=stride, bias=False),
                                           nn.BatchNorm2d(planes * 4))
            layers = [Bottleneck(self.inplanes, planes, stride, downsample)]
            self.inplanes = planes * 4
            layers += [Bottleneck(self.inplanes, planes) for _ in range(1, blocks)]
            return nn.Sequential(*layers)

        def forward(self, x):
            x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
            x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
            return self.fc(torch.flatten(self.avgpool(x), 1))

    return ResNet().eval()


def _state(module) -> dict:
    """Parameters and running statistics in registration order (not the batch counters)."""
    return {k: v for k, v in module.state_dict(keep_vars=True).items() if not k.endswith("num_batches_tracked")}


def test_the_generated_module_at_resnet50_sizes_has_torchvisions_weights():
    torch = pytest.importorskip("torch")
    spec = check_file(str(SPEC))
    sizes = runner.resolve_sizes(spec)
    with torch.device("meta"):    # shapes only: no 25M weights to fill
        ref = _torchvision_resnet(torch, **sizes)
    _mod, model = runner.build(generate(spec), sizes, meta=True)
    assert sum(p.numel() for p in ref.parameters()) == sum(p.numel() for p in model.parameters()) == PUBLISHED
    got, want = _state(model), _state(ref)
    assert [tuple(v.shape) for v in got.values()] == [tuple(v.shape) for v in want.values()]


@pytest.mark.parametrize("sizes", REDUCED["resnet50"], ids=["img-32", "img-64"])
def test_the_generated_module_matches_a_hand_written_resnet(sizes):
    torch = pytest.importorskip("torch")
    spec = check_file(str(SPEC))
    _mod, model = runner.build(generate(spec), runner.resolve_sizes(spec, sizes))
    ref = _torchvision_resnet(torch, **sizes)
    got, want = _state(model), _state(ref)
    assert len(got) == len(want)
    g = torch.Generator().manual_seed(5)
    with torch.no_grad():
        for (gname, p), (rname, q) in zip(got.items(), want.items()):
            assert p.shape == q.shape, (gname, rname)
            if rname.endswith("running_var"):
                q.copy_(torch.rand(q.shape, generator=g) + 0.5)
            elif q.dim() == 1:
                q.copy_(torch.randn(q.shape, generator=g) * 0.2 + (1.0 if rname.endswith("weight") else 0.0))
            else:
                q.copy_(torch.randn(q.shape, generator=g) / q[0].numel() ** 0.5)
            p.copy_(q)
    img = torch.randn(sizes["B"], sizes["Cin"], sizes["Img"], sizes["Img"], generator=g)
    with torch.no_grad():
        logits, want_logits = model(img), ref(img)
    assert logits.shape == (sizes["B"], sizes["K"])
    torch.testing.assert_close(logits, want_logits, rtol=1e-4, atol=1e-4)
    # the running statistics are used: other ones give other scores
    for m in ref.modules():
        if isinstance(m, torch.nn.BatchNorm2d):
            m.running_mean.add_(1.0)
    with torch.no_grad():
        assert (ref(img) - want_logits).abs().max() > 1e-2
